package app

import (
	"os"
	"slices"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/pool"
)

// configuredCommands puts each backend's configured command line, its
// ${VAR} references unexpanded, in place of the expanded one the pool
// knows: `status --json` and the dashboard promise "the configured
// command line", and an expanded `--token ${API_TOKEN}` would show the
// secret. A backend whose command is not what its entry expands to now
// (an old child draining after a reload) keeps what the pool says.
func configuredCommands(backends []pool.BackendInfo, f *config.File, lookup func(string) (string, bool)) {
	if f == nil {
		return
	}
	for i := range backends {
		b := &backends[i]
		s, ok := f.Servers[b.Server]
		if !ok || s.Command == "" {
			continue
		}
		line := append([]string{s.Command}, s.Args...)
		expanded := make([]string, len(line))
		for j, w := range line {
			expanded[j] = config.ExpandVars(w, lookup)
		}
		if slices.Equal(expanded, b.Command) {
			b.Command = line
		}
	}
}

// snapshot is the pool's snapshot as the app shows it (configuredCommands).
func (inst *Instance) snapshot() pool.Snapshot {
	return inst.shown(inst.Pool.Snapshot())
}

// shown applies configuredCommands to snap with the config in force.
func (inst *Instance) shown(snap pool.Snapshot) pool.Snapshot {
	inst.mu.Lock()
	f := inst.cfg
	inst.mu.Unlock()
	configuredCommands(snap.Backends, f, os.LookupEnv)
	return snap
}
