package ui

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unicode"

	"fyne.io/fyne/v2"
	"github.com/go-text/typesetting/font"
)

// Text renders as written.
//
// fyne's bundled Noto Sans Italic and Bold Italic (and, for the Greek
// spacing accents, the other weights) list spacing accents among the
// marks their GPOS table attaches to the letter before: the grave accent
// U+0060 (a backtick), the acute U+00B4, the Greek tonos. A shaper does
// what the font says (go-text does as HarfBuzz does), so "`switchboard
// connect NAME`." in an italic empty state drew "NAMÈ ." with a gap where
// the backtick stood. The fault is in the font data, so that is where it
// is fixed: the UI's theme serves fyne's fonts with every character that
// is not a combining mark taken out of the mark-attachment lookups'
// coverage. Nothing else in the fonts changes.

// textTheme is a theme whose fonts are fixed as above.
type textTheme struct{ fyne.Theme }

// Font serves the theme's font for style, fixed.
func (t textTheme) Font(style fyne.TextStyle) fyne.Resource { return fixedFont(t.Theme.Font(style)) }

// useFixedFonts makes a's theme serve fixed fonts, now and after the
// user changes theme.
func useFixedFonts(a fyne.App) {
	if a == nil {
		return
	}
	s := a.Settings()
	if _, done := s.Theme().(textTheme); !done {
		s.SetTheme(textTheme{s.Theme()})
	}
}

var fixedFonts struct {
	sync.Mutex
	byName map[string]fyne.Resource
}

// fixedFont is r with spacing characters out of its mark lookups, made
// once per font; r itself when it needs no fix or cannot be read.
func fixedFont(r fyne.Resource) fyne.Resource {
	if r == nil {
		return nil
	}
	fixedFonts.Lock()
	defer fixedFonts.Unlock()
	if f, ok := fixedFonts.byName[r.Name()]; ok {
		return f
	}
	if fixedFonts.byName == nil {
		fixedFonts.byName = map[string]fyne.Resource{}
	}
	out := r
	if data, n, err := unmarkSpacing(r.Content()); err == nil && n > 0 {
		out = fyne.NewStaticResource("fixed-"+r.Name(), data)
	} else if err != nil {
		fyne.LogError("fix the font "+r.Name(), err)
	}
	fixedFonts.byName[r.Name()] = out
	return out
}

// unmarkSpacing returns a copy of the TrueType/OpenType font ttf in which
// no glyph of a character outside Unicode's marks (M*) is in the mark
// coverage of a GPOS mark-to-base, mark-to-ligature or mark-to-mark
// lookup, and how many coverage entries it took out.
func unmarkSpacing(ttf []byte) ([]byte, int, error) {
	face, err := font.ParseTTF(bytes.NewReader(ttf))
	if err != nil {
		return nil, 0, fmt.Errorf("read the font: %w", err)
	}
	spacing := map[uint16]bool{}
	it := face.Cmap.Iter()
	for it.Next() {
		r, gid := it.Char()
		if !unicode.Is(unicode.M, r) && gid <= 0xffff {
			spacing[uint16(gid)] = true
		}
	}
	// A glyph a combining mark also maps to stays a mark.
	it = face.Cmap.Iter()
	for it.Next() {
		if r, gid := it.Char(); unicode.Is(unicode.M, r) {
			delete(spacing, uint16(gid))
		}
	}
	out := bytes.Clone(ttf)
	gpos, err := tableOffset(out, "GPOS")
	if err != nil || gpos == 0 {
		return out, 0, err
	}
	n := 0
	for _, cov := range markCoverages(out, gpos) {
		m, err := dropFromCoverage(out, cov, spacing)
		if err != nil {
			return nil, n, err
		}
		n += m
	}
	return out, n, nil
}

var errFont = errors.New("font data out of bounds")

func u16(b []byte, off int) (int, error) {
	if off < 0 || off+2 > len(b) {
		return 0, errFont
	}
	return int(binary.BigEndian.Uint16(b[off:])), nil
}

func u32(b []byte, off int) (int, error) {
	if off < 0 || off+4 > len(b) {
		return 0, errFont
	}
	return int(binary.BigEndian.Uint32(b[off:])), nil
}

// tableOffset finds a table in the font's directory; 0 when it has none.
func tableOffset(b []byte, tag string) (int, error) {
	n, err := u16(b, 4)
	if err != nil {
		return 0, err
	}
	for i := range n {
		rec := 12 + 16*i
		if rec+16 > len(b) {
			return 0, errFont
		}
		if string(b[rec:rec+4]) == tag {
			return u32(b, rec+8)
		}
	}
	return 0, nil
}

// markCoverages lists the offsets of the mark coverage tables of the GPOS
// table at gpos: the first coverage of each mark-to-base (4), mark-to-
// ligature (5) and mark-to-mark (6) subtable, behind extensions (9).
// Unreadable parts are skipped.
func markCoverages(b []byte, gpos int) []int {
	var out []int
	ll, err := u16(b, gpos+8)
	if err != nil {
		return nil
	}
	list := gpos + ll
	count, err := u16(b, list)
	if err != nil {
		return nil
	}
	for i := range count {
		lo, err := u16(b, list+2+2*i)
		if err != nil {
			continue
		}
		lookup := list + lo
		typ, err1 := u16(b, lookup)
		subs, err2 := u16(b, lookup+4)
		if err1 != nil || err2 != nil {
			continue
		}
		for j := range subs {
			so, err := u16(b, lookup+6+2*j)
			if err != nil {
				continue
			}
			sub, t := lookup+so, typ
			if t == 9 { // extension: the real subtable is further
				et, err1 := u16(b, sub+2)
				eo, err2 := u32(b, sub+4)
				if err1 != nil || err2 != nil {
					continue
				}
				sub, t = sub+eo, et
			}
			if t < 4 || t > 6 {
				continue
			}
			if co, err := u16(b, sub+2); err == nil && co != 0 {
				out = append(out, sub+co)
			}
		}
	}
	return out
}

// dropFromCoverage takes the glyphs in drop out of the coverage table at
// off, in place, and says how many it took out. A range table is written
// again without them, each range keeping its coverage index (the mark
// records are found by it), with a smaller range count: it never needs
// more room unless a glyph inside a range splits it into more ranges than
// the table had, which is an error; so is a glyph in a list table, whose
// indices are positions.
func dropFromCoverage(b []byte, off int, drop map[uint16]bool) (int, error) {
	format, err := u16(b, off)
	if err != nil {
		return 0, err
	}
	count, err := u16(b, off+2)
	if err != nil {
		return 0, err
	}
	switch format {
	case 1:
		for i := range count {
			g, err := u16(b, off+4+2*i)
			if err != nil {
				return 0, err
			}
			if drop[uint16(g)] {
				return 0, fmt.Errorf("glyph %d is in a coverage list, which cannot change in place", g)
			}
		}
		return 0, nil
	case 2:
	default:
		return 0, fmt.Errorf("unknown coverage format %d", format)
	}
	type rng struct{ start, end, idx int }
	var kept []rng
	n := 0
	for i := range count {
		at := off + 4 + 6*i
		start, err1 := u16(b, at)
		end, err2 := u16(b, at+2)
		idx, err3 := u16(b, at+4)
		if err := errors.Join(err1, err2, err3); err != nil {
			return 0, err
		}
		cur := rng{-1, -1, -1}
		for g := start; g <= end; g++ {
			if drop[uint16(g)] {
				n++
				if cur.start >= 0 {
					kept = append(kept, cur)
					cur = rng{-1, -1, -1}
				}
				continue
			}
			if cur.start < 0 {
				cur = rng{g, g, idx + g - start}
			}
			cur.end = g
		}
		if cur.start >= 0 {
			kept = append(kept, cur)
		}
	}
	if n == 0 {
		return 0, nil
	}
	if len(kept) > count {
		return 0, fmt.Errorf("taking %d glyphs out of a coverage splits its %d ranges into %d", n, count, len(kept))
	}
	binary.BigEndian.PutUint16(b[off+2:], uint16(len(kept)))
	for i, r := range kept {
		at := off + 4 + 6*i
		binary.BigEndian.PutUint16(b[at:], uint16(r.start))
		binary.BigEndian.PutUint16(b[at+2:], uint16(r.end))
		binary.BigEndian.PutUint16(b[at+4:], uint16(r.idx))
	}
	return n, nil
}
