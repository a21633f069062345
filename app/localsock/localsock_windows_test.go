//go:build windows

package localsock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// These run on Windows, and under Wine (make test-windows runs them
// there): Wine has one user, so "another user's" pipe is one this test
// creates with another owner.

// testPath is a socket path of the test's own: its pipe name is unique.
// No file is made there (Wine cannot remove a t.TempDir).
func testPath(t *testing.T) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("sb-%s-%d", t.Name(), time.Now().UnixNano()), "pool.sock")
}

// The pool's pipe is the current user's: Dial takes it, and the two ends
// talk.
func TestListenAndDialTheUsersPipe(t *testing.T) {
	path := testPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("echo " + line))
	}()
	c, err := DialTimeout(path, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("hello\n"))
	if got, err := bufio.NewReader(c).ReadString('\n'); err != nil || got != "echo hello\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	<-served
	// Its owner is the user, set explicitly (an elevated process's
	// objects are an administrator group's by default).
	h, err := openPipe(PipeName(path))
	if err == nil {
		defer windows.CloseHandle(h)
		sd, err := windows.GetSecurityInfo(h, windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
		if err != nil {
			t.Fatal(err)
		}
		owner, defaulted, err := sd.Owner()
		me, _ := userSID()
		if err != nil || !owner.Equals(me) || defaulted {
			t.Errorf("owner %v (defaulted %v), %v; want %v", owner, defaulted, err, me)
		}
	} else if !errors.Is(err, windows.ERROR_PIPE_BUSY) {
		t.Fatal(err)
	}
}

// squat creates the pipe of path first, as another user's program would:
// owned by owner, open to everyone. It fails where this process may not
// give an object that owner.
func squat(t *testing.T, path string, owner string) (windows.Handle, error) {
	t.Helper()
	sd, err := windows.SecurityDescriptorFromString("O:" + owner + "D:P(A;;GA;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	sa := &windows.SecurityAttributes{Length: uint32(unsafe.Sizeof(windows.SecurityAttributes{})), SecurityDescriptor: sd}
	n, _ := windows.UTF16PtrFromString(PipeName(path))
	h, err := windows.CreateNamedPipe(n, windows.PIPE_ACCESS_DUPLEX|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT, windows.PIPE_UNLIMITED_INSTANCES,
		pipeBuffer, pipeBuffer, 0, sa)
	if err != nil {
		return 0, err
	}
	t.Cleanup(func() { windows.CloseHandle(h) })
	return h, nil
}

// A pipe of the pool's name that another owner created first: Dial
// refuses it (the client would talk to that program in the pool's
// place), and Listen says the name is taken by a program not the user's.
func TestAPipeOfAnotherOwnerIsRefused(t *testing.T) {
	var owner string
	var errs []string
	path := testPath(t)
	// LocalSystem, or else the Administrators group: a SID other than the
	// user's that this process may make an owner (Wine allows any).
	for _, o := range []string{"SY", "BA"} {
		if _, err := squat(t, path, o); err != nil {
			errs = append(errs, o+": "+err.Error())
			continue
		}
		owner = o
		break
	}
	if owner == "" {
		t.Skipf("this process may not create a pipe owned by another SID: %s", strings.Join(errs, "; "))
	}
	_, err := DialTimeout(path, 5*time.Second)
	if !errors.Is(err, errNotOwner) {
		t.Fatalf("Dial of a pipe owned by %s: %v; want a refusal", owner, err)
	}
	t.Logf("Dial: %v", err)
	ln, err := Listen(path)
	if err == nil {
		ln.Close()
		t.Fatalf("Listen on a name another owner holds succeeded")
	}
	if !errors.Is(err, errNotOwner) || !strings.Contains(err.Error(), "took the pipe name first") {
		t.Fatalf("Listen: %v; want it to say another user's program holds the name", err)
	}
	t.Logf("Listen: %v", err)
}

// underWine: Wine lets CreateNamedPipe join an existing pipe even with
// FILE_FLAG_FIRST_PIPE_INSTANCE (Wine 8).
func underWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// A second Listen on the same path is refused, and says the user's own
// program holds the name.
func TestListenTwiceSaysTheUserHoldsIt(t *testing.T) {
	if underWine() {
		t.Skip("Wine does not enforce FILE_FLAG_FIRST_PIPE_INSTANCE: a second Listen joins the pipe")
	}
	path := testPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln2, err := Listen(path)
	if err == nil {
		ln2.Close()
		t.Fatal("a second Listen succeeded")
	}
	if !strings.Contains(err.Error(), "another program of this user") {
		t.Fatalf("second Listen: %v", err)
	}
}

// The comparison itself: the user's SID passes, any other is refused
// with both named.
func TestSameOwner(t *testing.T) {
	me, err := userSID()
	if err != nil {
		t.Fatal(err)
	}
	mine, _ := windows.StringToSid(me.String())
	if err := sameOwner(mine, me); err != nil {
		t.Errorf("the user's own SID: %v", err)
	}
	for _, s := range []string{"S-1-5-18", "S-1-5-32-544", "S-1-5-21-1-2-3-1001", me.String() + "-1"} {
		other, err := windows.StringToSid(s)
		if err != nil {
			t.Fatal(err)
		}
		err = sameOwner(other, me)
		if !errors.Is(err, errNotOwner) || !strings.Contains(err.Error(), s) || !strings.Contains(err.Error(), me.String()) {
			t.Errorf("owner %s: %v; want a refusal naming both SIDs", s, err)
		}
	}
	if err := sameOwner(nil, me); !errors.Is(err, errNotOwner) {
		t.Errorf("no owner: %v", err)
	}
}
