package ui

import (
	"bytes"
	"testing"
	"unicode"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
	"github.com/go-text/typesetting/di"
	"github.com/go-text/typesetting/font"
	"github.com/go-text/typesetting/language"
	"github.com/go-text/typesetting/shaping"
	"golang.org/x/image/math/fixed"
)

// shapeOffsets shapes text with ttf and returns each glyph's horizontal
// offset: a mark attached to the letter before has a negative one.
func shapeOffsets(t *testing.T, ttf []byte, text string) []fixed.Int26_6 {
	t.Helper()
	face, err := font.ParseTTF(bytes.NewReader(ttf))
	if err != nil {
		t.Fatal(err)
	}
	runes := []rune(text)
	out := (&shaping.HarfbuzzShaper{}).Shape(shaping.Input{Text: runes, RunEnd: len(runes), Direction: di.DirectionLTR,
		Face: face, Size: fixed.I(16), Script: language.Latin, Language: language.NewLanguage("en")})
	var offs []fixed.Int26_6
	for _, g := range out.Glyphs {
		offs = append(offs, g.XOffset)
	}
	return offs
}

// TestBundledItalicMakesBacktickAMark is the cause: fyne's italic font
// shapes a backtick after a letter as an accent over it. If fyne fixes
// its font, this fails, and the fix can go.
func TestBundledItalicMakesBacktickAMark(t *testing.T) {
	offs := shapeOffsets(t, theme.DefaultTextItalicFont().Content(), "E`")
	if len(offs) != 2 || offs[1] >= 0 {
		t.Errorf("fyne's italic font no longer attaches the backtick (offsets %v): the font fix (fixedFont) is not needed; remove it", offs)
	}
}

// TestFixedFontsShapeSpacingAccentsAsWritten: with the fix, no spacing
// accent in any bundled style is moved onto the letter before, and real
// combining marks still are.
func TestFixedFontsShapeSpacingAccentsAsWritten(t *testing.T) {
	styles := map[string]fyne.TextStyle{"regular": {}, "bold": {Bold: true}, "italic": {Italic: true},
		"bold italic": {Bold: true, Italic: true}, "monospace": {Monospace: true}}
	for name, style := range styles {
		t.Run(name, func(t *testing.T) {
			orig := theme.DefaultTheme().Font(style)
			fixedRes := fixedFont(orig)
			for _, text := range []string{"NAME`.", "a`b", "x´y", "α΄β", "e\u0301"} {
				offs := shapeOffsets(t, fixedRes.Content(), text)
				runes := []rune(text)
				for i, off := range offs {
					if i >= len(runes) {
						break
					}
					mark := unicode.Is(unicode.M, runes[i])
					if !mark && off != 0 {
						t.Errorf("%q: %q is moved by %v onto the letter before", text, runes[i], off)
					}
				}
			}
			// A combining acute still sits on its letter, as it should.
			if offs := shapeOffsets(t, fixedRes.Content(), "e\u0301"); len(offs) == 2 && offs[1] == 0 &&
				shapeOffsets(t, orig.Content(), "e\u0301")[1] != 0 {
				t.Error("the fix moved a real combining mark off its letter")
			}
		})
	}
}

// TestUnmarkSpacingChangesOnlyCoverage: the fixed font differs from
// fyne's only in the GPOS table, and a font without the fault is left
// alone.
func TestUnmarkSpacingChangesOnlyCoverage(t *testing.T) {
	ttf := theme.DefaultTextItalicFont().Content()
	out, n, err := unmarkSpacing(ttf)
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || len(out) != len(ttf) {
		t.Fatalf("took out %d coverage entries; size %d -> %d", n, len(ttf), len(out))
	}
	gpos, err := tableOffset(ttf, "GPOS")
	if err != nil || gpos == 0 {
		t.Fatalf("no GPOS: %v", err)
	}
	var gposLen int
	n2, _ := u16(ttf, 4)
	for i := range n2 {
		rec := 12 + 16*i
		if string(ttf[rec:rec+4]) == "GPOS" {
			gposLen, _ = u32(ttf, rec+12)
		}
	}
	for i := range ttf {
		if ttf[i] != out[i] && (i < gpos || i >= gpos+gposLen) {
			t.Fatalf("byte %d outside GPOS changed", i)
		}
	}
	mono := theme.DefaultTextMonospaceFont().Content()
	if _, n, err := unmarkSpacing(mono); err != nil || n != 0 {
		t.Errorf("the monospace font: %d entries taken out, %v; want none", n, err)
	}
}

// TestItalicBacktickRenders: the empty state that showed "NAMÈ ." renders
// its backticks where they are written (the markup keeps the text; the
// picture is reviewed as testdata/backtick.png).
func TestItalicBacktickRenders(t *testing.T) {
	a := newTestApp(t)
	useFixedFonts(a)
	w := a.NewWindow("backtick")
	l := widget.NewLabelWithStyle("Point a client at `switchboard connect NAME`.", fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	w.SetContent(l)
	w.Resize(fyne.NewSize(420, 40))
	goldenPNG(t, "backtick.png", w.Canvas())
	if res := a.Settings().Theme().Font(fyne.TextStyle{Italic: true}); res.Name() != "fixed-NotoSans-Italic.ttf" {
		t.Errorf("the app's italic font is %s", res.Name())
	}
}
