// Package fileid tells whether a path still names the file it named
// before. os.SameFile does, with os.Stat, everywhere but on Windows: there
// os.Stat leaves a file's identity to be read at the first os.SameFile,
// from whatever file the path names by then (an earlier Stat and a later
// one of a replaced file then match), and through a handle that shares
// nothing, which Wine refuses on a file another handle maps for writing
// (the same file then never matches). Stat reads it at once.
package fileid
