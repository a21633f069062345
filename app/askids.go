package app

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/app/config"
	"github.com/switchboard-mcp/switchboard/app/safefile"
)

// The ids of the pool's own requests to clients (a child's question it
// puts to a client, its roots/list) never repeat across the runs of one
// home: a session outlives its pool, and a client's late answer to a
// question of a pool gone must not answer the next pool's question of the
// same id (pool.Options.AskIDFloor). A run counts them from the clock in
// microseconds since 1970, or from the high-water mark the runs before it
// left in Paths.AskIDsFile when that is higher (the clock was set back),
// and, before its pool asks anything, moves the mark a block above where
// it counts from: the next run (a restart, a crash's, the program an
// upgrade execs, which reads the file again) starts above every id this
// one gives. Runs of one home never run at once (the instance lock, taken
// before), so the file has one writer at a time.

const (
	// askIDBlock is how many ids a run reserves: 4 billion, more than a
	// run asks (at a thousand questions a second, 50 days' worth), few
	// enough that a million restarts fit below maxAskID. A run that gives
	// more goes on counting past its block: the next run still starts
	// above its ids unless the clock was also set back.
	askIDBlock = 1 << 32
	// maxAskID is the largest id clients read exactly: they read ids as
	// JavaScript numbers. Where a block would pass it, the count starts
	// again from the clock (ids a run gave about a million restarts ago,
	// whose answers nobody still owes); past the year 2255 the clock
	// itself is past it.
	maxAskID = 1<<53 - 1
	// maxAskIDsFile bounds the file read: one number.
	maxAskIDsFile = 64
)

// writeAskIDsFile writes the mark: temporary file, sync, rename. Tests
// make it fail.
var writeAskIDsFile = config.WritePrivateFile

// reserveAskIDs is where this run's ids of the pool's requests to clients
// count from (pool.Options.AskIDFloor), now the clock's time: above the
// clock and the file's mark, with the mark moved a block above it. It
// never fails a start: a mark that does not read is reported and the
// count starts from the clock (as with no file); one that cannot be
// written is reported, and the next run, if the clock was set back,
// may ask under ids this one asked under.
func reserveAskIDs(path string, now time.Time, log *slog.Logger) uint64 {
	clock := uint64(max(now.UnixMicro(), 1))
	floor := clock
	switch mark, err := readAskIDMark(path); {
	case err == nil:
		floor = max(floor, mark)
	case errors.Is(err, fs.ErrNotExist): // a first run
	default:
		log.Warn("the ids of the pool's questions to clients count from the clock: their mark does not read", "file", path, "err", err)
	}
	if floor > maxAskID-askIDBlock {
		log.Info("the ids of the pool's questions to clients start again from the clock: they reached 2^53", "file", path)
		floor = clock
	}
	if err := writeAskIDsFile(path, []byte(strconv.FormatUint(floor+askIDBlock, 10)+"\n")); err != nil {
		log.Warn("the ids of the pool's questions to clients are not reserved: if the clock is set back before the next run, it may ask under this run's ids", "file", path, "err", err)
	}
	return floor
}

// readAskIDMark reads the mark the runs before left: one decimal number.
func readAskIDMark(path string) (uint64, error) {
	data, err := safefile.Read(path, maxAskIDsFile)
	if err != nil {
		return 0, fmt.Errorf("read the ask ids' mark: %w", err)
	}
	mark, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the ask ids' mark %s: %w", path, err)
	}
	return mark, nil
}
