//go:build windows

package autostart

import (
	"errors"

	"golang.org/x/sys/windows/registry"
)

// userRunKey is HKCU\Software\Microsoft\Windows\CurrentVersion\Run.
type userRunKey struct{}

const runSubkey = `Software\Microsoft\Windows\CurrentVersion\Run`

func (userRunKey) Get(name string) (string, bool, error) {
	k, err := registry.OpenKey(registry.CURRENT_USER, runSubkey, registry.QUERY_VALUE)
	if err != nil {
		return "", false, err
	}
	defer k.Close()
	v, _, err := k.GetStringValue(name)
	if errors.Is(err, registry.ErrNotExist) {
		return "", false, nil
	}
	return v, err == nil, err
}

func (userRunKey) Set(name, value string) error {
	k, _, err := registry.CreateKey(registry.CURRENT_USER, runSubkey, registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	return k.SetStringValue(name, value)
}

func (userRunKey) Delete(name string) error {
	k, err := registry.OpenKey(registry.CURRENT_USER, runSubkey, registry.SET_VALUE)
	if err != nil {
		return err
	}
	defer k.Close()
	if err := k.DeleteValue(name); err != nil && !errors.Is(err, registry.ErrNotExist) {
		return err
	}
	return nil
}
