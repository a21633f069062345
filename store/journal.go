package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// The journal is the store's record of the requests in flight right now:
// a file next to the database (PATH-inflight) mapped into memory, in
// which Record writes each request as it is received and marks it written
// to a child and answered, and the writer frees it once the request's end
// is committed: a few stores per event, no system call, no SQLite. A
// request's row reaches the database only when it ends (or has been in
// flight for Options.InFlightAfter), so it is the journal that knows, at a
// crash, what was still in flight: the memory of a killed process stays in
// the file (the page cache), and the next Open turns each request it lists
// into an abandoned row, or, for one answered whose end was not committed
// yet, an answered row whose outcome is unknown. A power cut loses it, as
// it loses SQLite's last transactions (synchronous=NORMAL).
//
// Layout (little-endian): a header of journalHeader bytes (magic, layout
// version, the run that writes it, the slot size, the slot count, and at
// journalStoppedAt the stop mark), then journalSlots slots of
// journalSlotSize bytes:
//
//	0  state      uint32  slotFree, slotTaken, slotWritten or slotAnswered; stored last
//	4  pid        int32   the child it was written to
//	8  id         int64   the row id the request will have
//	16 poolID     uint64
//	24 received   int64   Unix µs
//	32 written    int64   Unix µs, 0 if not written
//	40 answered   int64   Unix µs, 0 if not answered
//	48 lengths    5 bytes session, server, method, name, original id
//	53 cut        uint8   bit i set: text i was cut to fit (see fit)
//	56 the five texts, back to back
//
// Version 1 (no answered, no cut: its lengths at 40, its texts at 48) is
// read too, for a crash of a build that wrote it.
const (
	journalMagic    = 0x4a425753 // "SWBJ"
	journalVersion  = 2
	journalHeader   = 64
	journalSlots    = 16384
	journalSlotSize = 256
	journalSize     = journalHeader + journalSlots*journalSlotSize
	// journalTexts is the room for the texts of one slot; texts that do
	// not fit are cut (fit).
	journalTexts = journalSlotSize - 56
	// cutMark ends a text the journal cut, as its reader gives it.
	cutMark = "…"
)

// journalStoppedAt is where the header holds its stop mark (int64 Unix
// µs; 0 for none): the run it names stopped cleanly then, but could not
// mark itself ended in the database (another program held it locked), so
// that the next Open ends it as stopped rather than crashed. Builds that
// predate it ignore it (reset clears it).
const journalStoppedAt = 24

// journalAliveAt is where the header holds the run's last sign of life
// (int64 Unix µs; 0 for none): the writer's heartbeats store it whether
// or not the database takes their writes, so that a crash
// while the database refused them (locked by another program, the disk
// full) still ages its abandoned requests from about when the run died
// (startRun). Builds that predate it ignore it (reset clears it).
const journalAliveAt = 32

// Slot states. A reader trusts a slot's other fields only when its state
// is not free; the writer stores the state last, atomically.
const (
	slotFree     uint32 = 0
	slotTaken    uint32 = 1 // received, not (yet) written to a child
	slotWritten  uint32 = 2 // written to a child: it may have run
	slotAnswered uint32 = 3 // answered; freed once its end is committed
)

// journal is the mapped file. Its methods are called with the Store's
// recorder lock held (one writer at a time); a nil *journal does nothing.
//
// A file truncated in place under its mapping (`: > file`, cp over it,
// logrotate's copytruncate) makes a load or store past its new end
// SIGBUS, which would kill the process: every method that touches the
// mapping does so with the goroutine's SetPanicOnFault on, and a fault
// there loses the journal (guard) instead. A lost journal does nothing
// until the writer maps its file again (moveTo).
type journal struct {
	path      string
	mem       []byte // nil once lost (or closed)
	unmap     func() error
	file      os.FileInfo // the file mapped, to tell when another takes its path; the writer's alone
	free      []int32     // released slots, reused first (fewer pages touched)
	next      int32       // the first slot never used in this run
	nWritten  int         // slots in state slotWritten
	nAnswered int         // slots in state slotAnswered
	run       int64       // the run reset named
	// gen counts the mappings lost: a slot handle carries the gen it was
	// taken in (handle), so that one of a lost mapping, still held by
	// a request or a row, is none of the mapping that replaced it.
	gen int32
	// lost says why the mapping faulted; nil while it works. remapErr
	// says why the writer could not map the file at the path again.
	lost, remapErr error
	// onLose is called, the lock held, when the mapping is lost: the
	// requests it listed need their rows (a crash must find them).
	onLose func()
}

// A slot handle, as take gives it and the other methods take it, is the
// slot + 1 in its low slotBits, and the journal's gen above them: never
// 0, which is no slot.
const (
	slotBits = 15 // room for journalSlots
	genMask  = 1<<(31-slotBits) - 1
)

// handle is slot's handle in this mapping.
func (j *journal) handle(slot int32) int32 { return j.gen<<slotBits | (slot + 1) }

// index is the slot of handle h, or -1 for none or one of a lost mapping.
func (j *journal) index(h int32) int32 {
	if h <= 0 || h>>slotBits != j.gen {
		return -1
	}
	return h&(1<<slotBits-1) - 1
}

// guard is deferred, with debug.SetPanicOnFault(true), by each method
// that touches the mapping: it restores the goroutine's setting, and
// turns a fault on the mapping (its file shrank under it) into the
// journal's loss. Any other panic goes on.
func (j *journal) guard(was bool) {
	debug.SetPanicOnFault(was)
	if p := recover(); p != nil {
		if !faultIn(p, j.mem) {
			panic(p)
		}
		j.lose(errShrunk(j.path))
	}
}

// errShrunk is why the journal at path was lost: its file shrank under
// the mapping.
func errShrunk(path string) error {
	return fmt.Errorf("journal %s: its file shrank under Switchboard (was it truncated?)", path)
}

// faultIn says whether p is the panic of a fault (SetPanicOnFault) at an
// address within mem.
func faultIn(p any, mem []byte) bool {
	f, ok := p.(interface{ Addr() uintptr })
	if !ok || len(mem) == 0 {
		return false
	}
	return f.Addr()-uintptr(unsafe.Pointer(unsafe.SliceData(mem))) < uintptr(len(mem))
}

// lose stops using the mapping, for why: every slot is forgotten, and the
// handles given before are none of the next mapping's. The mapping itself
// stays until the writer unmaps it (moveTo, close).
func (j *journal) lose(why error) {
	if j.mem == nil {
		return
	}
	j.mem, j.lost = nil, why
	j.gen = (j.gen + 1) & genMask
	j.free, j.next, j.nWritten, j.nAnswered = j.free[:0], 0, 0, 0
	if j.onLose != nil {
		j.onLose()
	}
}

// journaled is one request a journal lists.
type journaled struct {
	Run, ID                                   int64
	PoolID                                    uint64
	Session, Server, Method, Name, OriginalID string
	Received, Written, Answered               int64 // Unix µs; 0 if not
	PID                                       int
}

// journalPath is the journal of the database at path.
func journalPath(db string) string { return db + "-inflight" }

// openJournal maps the journal of the database at db, creating it 0600.
// It returns what it lists (the requests a run that did not stop left in
// flight, for the caller to record) and leaves it as it was: reset starts
// the new run in it. The file gets every block of its journalSize bytes
// before it is mapped: a store into a mapped page the file system has no
// room for (a hole of a sparse file, on a full disk or at a quota) is
// SIGBUS, which kills the process. When it cannot have them it returns
// what the file lists all the same, with the error.
func openJournal(db string) (*journal, []journaled, error) {
	path := journalPath(db)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	had := make([]byte, journalSize) // the file's bytes, zeros past its end
	n, err := f.ReadAt(had, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("journal: %w", err)
	}
	listed := readJournal(had[:n])
	if err := reserve(f, had, int64(n)); err != nil {
		return nil, listed, fmt.Errorf("journal %s: reserve %d bytes: %w", path, journalSize, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, listed, fmt.Errorf("journal %s: %w", path, err)
	}
	mem, unmap, err := mapFile(f, journalSize)
	if err != nil {
		return nil, listed, fmt.Errorf("journal %s: %w", path, err)
	}
	return &journal{path: path, mem: mem, unmap: unmap, file: fi}, listed, nil
}

// rewrite gives f, size bytes long, every block of the journalSize bytes
// of had (its bytes, zeros past its end) by writing them: a file system
// allocates what is written. On failure it gives back what it took: a
// full disk needs every byte for the database.
func rewrite(f *os.File, had []byte, size int64) error {
	if _, err := f.WriteAt(had[:journalSize], 0); err != nil {
		if size < journalSize {
			_ = f.Truncate(size)
		}
		return err
	}
	return nil
}

// readJournalFile lists what the journal of the database at db holds,
// read as a file (a read-only Store; the writer may be running). A
// missing journal lists nothing.
func readJournalFile(db string) ([]journaled, error) {
	b, err := os.ReadFile(journalPath(db))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	return readJournal(b), nil
}

// readJournal lists the requests in flight in mem; a header it does not
// know (another layout, an empty file) lists none.
func readJournal(mem []byte) []journaled {
	le := binary.LittleEndian
	if len(mem) < journalHeader || le.Uint32(mem) != journalMagic || le.Uint32(mem[16:]) != journalSlotSize {
		return nil
	}
	lensAt, textsAt := 48, 56
	switch le.Uint32(mem[4:]) {
	case journalVersion:
	case 1:
		lensAt, textsAt = 40, 48
	default:
		return nil
	}
	run := int64(le.Uint64(mem[8:]))
	slots := int(le.Uint32(mem[20:]))
	var out []journaled
	for i := range slots {
		off := journalHeader + i*journalSlotSize
		if off+journalSlotSize > len(mem) {
			break
		}
		b := mem[off : off+journalSlotSize]
		state := le.Uint32(b)
		if state != slotTaken && state != slotWritten && state != slotAnswered {
			continue
		}
		lens := b[lensAt : lensAt+5]
		total := 0
		for _, n := range lens {
			total += int(n)
		}
		if total > journalSlotSize-textsAt {
			continue // torn or foreign: not a slot this layout wrote
		}
		texts := b[textsAt:]
		var cut byte
		if textsAt > 53 {
			cut = b[53]
		}
		take := func(i int) string {
			s := string(texts[:lens[i]])
			texts = texts[lens[i]:]
			if cut&(1<<i) != 0 {
				s += cutMark
			}
			return s
		}
		e := journaled{Run: run, PID: int(int32(le.Uint32(b[4:]))), ID: int64(le.Uint64(b[8:])), PoolID: le.Uint64(b[16:]),
			Received: int64(le.Uint64(b[24:]))}
		e.Session, e.Server, e.Method, e.Name, e.OriginalID = take(0), take(1), take(2), take(3), take(4)
		if state != slotTaken {
			e.Written = int64(le.Uint64(b[32:]))
		}
		if state == slotAnswered {
			e.Answered = int64(le.Uint64(b[40:]))
		}
		out = append(out, e)
	}
	return out
}

// reset empties the journal for run: every slot free, the header naming
// run. Call it once what the journal listed is safely in the database.
func (j *journal) reset(run int64) {
	if j == nil || j.mem == nil {
		return
	}
	defer j.guard(debug.SetPanicOnFault(true))
	j.run = run
	clear(j.mem)
	le := binary.LittleEndian
	le.PutUint32(j.mem[4:], journalVersion)
	le.PutUint64(j.mem[8:], uint64(run))
	le.PutUint32(j.mem[16:], journalSlotSize)
	le.PutUint32(j.mem[20:], journalSlots)
	j.free, j.next, j.nWritten, j.nAnswered = j.free[:0], 0, 0, 0
	atomic.StoreUint32(j.word(0), journalMagic) // last: a reader sees a whole header or none
}

// take journals a received request and returns its slot's handle, or 0
// when no slot is free (or the mapping is lost). Its name is redacted as
// its row's is (redactName); texts longer than the slot holds are cut
// (fit).
func (j *journal) take(r *reqRow) (handle int32) {
	if j == nil || j.mem == nil {
		return 0
	}
	defer j.guard(debug.SetPanicOnFault(true))
	texts := [5]string{r.session, r.server, r.method, redactName(r.name), r.originalID}
	total, longest := 0, 0
	for _, t := range texts {
		total, longest = total+len(t), max(longest, len(t))
	}
	var cut byte
	if total > journalTexts || longest > 255 {
		cut = fit(&texts)
	}
	var slot int32
	switch {
	case len(j.free) > 0:
		slot = j.free[len(j.free)-1]
		j.free = j.free[:len(j.free)-1]
	case j.next < journalSlots:
		slot = j.next
		j.next++
	default:
		return 0
	}
	b := j.slot(slot)
	le := binary.LittleEndian
	le.PutUint32(b[4:], uint32(int32(r.pid)))
	le.PutUint64(b[8:], uint64(r.id))
	le.PutUint64(b[16:], r.poolID)
	le.PutUint64(b[24:], uint64(r.received))
	le.PutUint64(b[32:], 0)
	le.PutUint64(b[40:], 0)
	at := b[56:]
	for i, t := range texts {
		b[48+i] = byte(len(t))
		at = at[copy(at, t):]
	}
	b[53] = cut
	atomic.StoreUint32(j.word(journalHeader+int(slot)*journalSlotSize), slotTaken) // after the fields
	return j.handle(slot)
}

// fit cuts texts to fit a slot: journalTexts bytes in all, none over
// 255. The shortest stay whole, and each longer one gets an equal share
// of the room they leave, cut at a character boundary: a deep file URI (a
// resources/read names it) is cut, its session, server, method and id are
// kept. It returns which it cut, bit i for texts[i].
func fit(texts *[5]string) (cut byte) {
	order := [5]int{0, 1, 2, 3, 4}
	for i := 1; i < len(order); i++ { // shortest first
		for k := i; k > 0 && len(texts[order[k]]) < len(texts[order[k-1]]); k-- {
			order[k], order[k-1] = order[k-1], order[k]
		}
	}
	room := journalTexts
	for k, i := range order {
		share := min(room/(len(order)-k), 255)
		if t := texts[i]; len(t) > share {
			n := share
			for n > 0 && !utf8.RuneStart(t[n]) {
				n--
			}
			texts[i], cut = t[:n], cut|1<<i
		}
		room -= len(texts[i])
	}
	return cut
}

// inUse is how many requests the journal lists as in flight now, and
// how many of them as written to a child.
func (j *journal) inUse() (listed, written int) {
	if j == nil {
		return 0, 0
	}
	return int(j.next) - len(j.free) - j.nAnswered, j.nWritten
}

// short says that more than three quarters of the slots are taken.
func (j *journal) short() bool {
	return j != nil && int(j.next)-len(j.free) > journalSlots*3/4
}

// written marks handle's request as written to child pid at µs.
func (j *journal) written(handle int32, at int64, pid int) {
	if j == nil || j.mem == nil {
		return
	}
	slot := j.index(handle)
	if slot < 0 {
		return
	}
	defer j.guard(debug.SetPanicOnFault(true))
	b := j.slot(slot)
	binary.LittleEndian.PutUint64(b[32:], uint64(at))
	binary.LittleEndian.PutUint32(b[4:], uint32(int32(pid)))
	state := j.word(journalHeader + int(slot)*journalSlotSize)
	if atomic.LoadUint32(state) != slotWritten {
		j.nWritten++
	}
	atomic.StoreUint32(state, slotWritten)
}

// answered marks handle's request as answered at µs, and as written to
// child pid at written (0: never written): a crash before its end is
// committed records it as answered, its outcome unknown, not as owed.
func (j *journal) answered(handle int32, written, at int64, pid int) {
	if j == nil || j.mem == nil {
		return
	}
	slot := j.index(handle)
	if slot < 0 {
		return
	}
	defer j.guard(debug.SetPanicOnFault(true))
	b := j.slot(slot)
	le := binary.LittleEndian
	le.PutUint64(b[32:], uint64(written))
	le.PutUint64(b[40:], uint64(at))
	le.PutUint32(b[4:], uint32(int32(pid)))
	state := j.word(journalHeader + int(slot)*journalSlotSize)
	switch atomic.LoadUint32(state) {
	case slotAnswered:
		return
	case slotWritten:
		j.nWritten--
	}
	j.nAnswered++
	atomic.StoreUint32(state, slotAnswered)
}

// release frees handle's slot: its request ended.
func (j *journal) release(handle int32) {
	if j == nil || j.mem == nil {
		return
	}
	slot := j.index(handle)
	if slot < 0 {
		return
	}
	defer j.guard(debug.SetPanicOnFault(true))
	state := j.word(journalHeader + int(slot)*journalSlotSize)
	switch atomic.LoadUint32(state) {
	case slotWritten:
		j.nWritten--
	case slotAnswered:
		j.nAnswered--
	}
	atomic.StoreUint32(state, slotFree)
	j.free = append(j.free, slot)
}

// moveTo makes j write into fresh, a journal just mapped from the file
// at its path: with all that j lists, or, when j's mapping is lost (or
// faults as it is copied), empty for its run. It returns the unmap of
// j's old mapping, for the caller to call once the lock is released.
func (j *journal) moveTo(fresh *journal) (unmap func() error) {
	kept := j.copyTo(fresh.mem)
	unmap = j.unmap
	j.mem, j.unmap, j.file, j.lost, j.remapErr = fresh.mem, fresh.unmap, fresh.file, nil, nil
	if !kept {
		j.reset(j.run)
	}
	return unmap
}

// copyTo copies the mapping to mem, and says whether it could: not when
// it is lost, or faults.
func (j *journal) copyTo(mem []byte) (ok bool) {
	if j.mem == nil {
		return false
	}
	was := debug.SetPanicOnFault(true)
	defer func() { // guard's, for either mapping
		debug.SetPanicOnFault(was)
		if p := recover(); p != nil {
			if !faultIn(p, j.mem) && !faultIn(p, mem) {
				panic(p)
			}
			j.lose(errShrunk(j.path))
		}
	}()
	copy(mem, j.mem)
	return true
}

// close unmaps the journal, lost or not, leaving the file as it is.
func (j *journal) close() error {
	if j == nil || j.unmap == nil {
		return nil
	}
	unmap := j.unmap
	j.mem, j.unmap = nil, nil
	return unmap()
}

func (j *journal) slot(i int32) []byte {
	off := journalHeader + int(i)*journalSlotSize
	return j.mem[off : off+journalSlotSize]
}

// word is the uint32 at off, for atomic stores (off is 4-aligned, and so
// is the mapping).
func (j *journal) word(off int) *uint32 { return (*uint32)(unsafe.Pointer(&j.mem[off])) }

// journalStop is a journal's marks: the run it names stopped cleanly At
// (Unix µs; 0: it did not, or marked itself ended) without marking itself
// ended, and was last alive at Alive (Unix µs; 0: not known).
type journalStop struct{ Run, At, Alive int64 }

// readJournalStop is the stop mark of the journal of the database at db;
// the zero journalStop when it has none (or no journal).
func readJournalStop(db string) journalStop {
	f, err := os.Open(journalPath(db))
	if err != nil {
		return journalStop{}
	}
	defer f.Close()
	head := make([]byte, journalHeader)
	if _, err := io.ReadFull(f, head); err != nil {
		return journalStop{}
	}
	le := binary.LittleEndian
	if le.Uint32(head) != journalMagic || le.Uint32(head[16:]) != journalSlotSize {
		return journalStop{}
	}
	at, alive := int64(le.Uint64(head[journalStoppedAt:])), int64(le.Uint64(head[journalAliveAt:]))
	if at == 0 && alive == 0 {
		return journalStop{}
	}
	return journalStop{Run: int64(le.Uint64(head[8:])), At: at, Alive: alive}
}

// markAlive records in the journal that its run was alive at (Unix µs).
func (j *journal) markAlive(at int64) {
	if j == nil || j.mem == nil {
		return
	}
	defer j.guard(debug.SetPanicOnFault(true))
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&j.mem[journalAliveAt])), uint64(at))
}

// markStopped records in the journal that its run stopped cleanly at
// (Unix µs); false when it is not mapped (markStoppedFile then).
func (j *journal) markStopped(at int64) (mapped bool) {
	if j == nil || j.mem == nil {
		return false
	}
	defer j.guard(debug.SetPanicOnFault(true))
	binary.LittleEndian.PutUint64(j.mem[journalStoppedAt:], uint64(at))
	return true
}

// markStoppedFile records in the journal file of the database at db that
// run stopped cleanly at (Unix µs), if its header names run.
func markStoppedFile(db string, run, at int64) error {
	f, err := os.OpenFile(journalPath(db), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	head := make([]byte, journalHeader)
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("journal %s: %w", journalPath(db), err)
	}
	le := binary.LittleEndian
	if le.Uint32(head) != journalMagic || int64(le.Uint64(head[8:])) != run {
		return fmt.Errorf("journal %s: not this run's", journalPath(db))
	}
	var mark [8]byte
	le.PutUint64(mark[:], uint64(at))
	if _, err := f.WriteAt(mark[:], journalStoppedAt); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
