package wire

// The head is what an attached session's pool has read of its client's
// input past the last whole line: the start of a line the client is still
// writing (a large message, a client that writes in pieces). Those bytes
// are gone from the client's pipe, so a pool killed with them would leave
// the next pool only the rest of the line: the line would be lost, and
// its rest a parse error. So the pool keeps them in memory the shim
// shares, a memfd it sends with its Welcome (Welcome.Head) to a shim that
// offered to take one (Hello.Head); a shim whose pool went away without a
// Farewell gives the head to the next pool ahead of the rest of the
// client's input (Resume.PendingBytes), and the line arrives whole. After
// a Farewell the shim has the head in the Farewell's Pending already: it
// ignores the memfd.
//
// The memfd is sealed at its size (F_SEAL_SHRINK, F_SEAL_GROW, then
// F_SEAL_SEAL), as the ledger is: the pool stores into its mapping on
// every read that leaves a line unended. Only Linux has one.
//
// Layout: a little-endian uint32, the head's length, at offset 0, then
// the head's bytes from HeadOffset; the memfd is HeadOffset plus the
// longest head the pool keeps. The pool writes a head's bytes before its
// length: a head it begins anew it first marks empty, and one it adds to
// it extends past the length in force. A length larger than the memfd
// holds, or a memfd shorter than HeadOffset, says there is no head.
const HeadOffset = 8
