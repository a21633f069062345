//go:build !windows

package autostart

import "errors"

// userRunKey exists only on Windows; elsewhere ForThisOS never uses it.
type userRunKey struct{}

var errNoRegistry = errors.New("no Windows registry on this OS")

func (userRunKey) Get(string) (string, bool, error) { return "", false, errNoRegistry }
func (userRunKey) Set(string, string) error         { return errNoRegistry }
func (userRunKey) Delete(string) error              { return errNoRegistry }
