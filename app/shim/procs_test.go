package shim

import (
	"os"
	"slices"
	"testing"
)

func TestOneProcEnv(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env, out []string
	}{
		{"unset", []string{"A=1"}, []string{"A=1", "GOMAXPROCS=1", procsMark + "=1"}},
		{"set by the user", []string{"GOMAXPROCS=4", "A=1"}, []string{"GOMAXPROCS=4", "A=1"}},
		{"set empty by the user", []string{"GOMAXPROCS="}, []string{"GOMAXPROCS="}},
		{"started with it", []string{"GOMAXPROCS=1", procsMark + "=1"}, []string{"GOMAXPROCS=1", procsMark + "=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.env)
			if got := OneProcEnv(in); !slices.Equal(got, tc.out) {
				t.Errorf("OneProcEnv(%q) = %q, want %q", tc.env, got, tc.out)
			}
			if !slices.Equal(in, tc.env) {
				t.Errorf("OneProcEnv changed its argument: %q", in)
			}
		})
	}
}

// RestoreProcs removes only a GOMAXPROCS that OneProcEnv added.
func TestRestoreProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	t.Setenv(procsMark, "")
	os.Unsetenv(procsMark)
	if RestoreProcs() || os.Getenv("GOMAXPROCS") != "3" {
		t.Fatalf("a user's GOMAXPROCS=3: restored, now %q", os.Getenv("GOMAXPROCS"))
	}
	t.Setenv("GOMAXPROCS", "1")
	t.Setenv(procsMark, "1")
	if !RestoreProcs() {
		t.Fatal("started with OneProcEnv: not restored")
	}
	for _, k := range []string{"GOMAXPROCS", procsMark} {
		if v, set := os.LookupEnv(k); set {
			t.Errorf("%s=%s left in the environment", k, v)
		}
	}
}
