package pool

import (
	"slices"
	"testing"
)

// A child's question voided while its asker is still delivering it (its
// session closing, the child dying, between the question's record and
// its delivery) is withdrawn by that asker, after it, never by the one
// that voided it: the client must not get the withdrawal before the
// question, which would then stay open. Once delivered, the one that
// voids it withdraws it; an answered question is withdrawn by nobody.
func TestQuestionVoidedAsItGoesOutIsWithdrawnAfterIt(t *testing.T) {
	tab := newRequestTable(nil)
	a, b := &session{closed: make(chan struct{})}, &session{closed: make(chan struct{})}
	ask := func(id uint64, s *session) {
		t.Helper()
		if !tab.addQuestion(id, []byte("c"), s, "", true, "") {
			t.Fatalf("question %d not recorded", id)
		}
	}
	posed := func(id uint64, wantVoid bool) {
		t.Helper()
		why, void := tab.posed(id)
		if void != wantVoid || void && why != "gone" {
			t.Fatalf("question %d delivered: void %t (%q), want %t", id, void, why, wantVoid)
		}
	}

	ask(1, a) // voided as it goes out: its asker withdraws it
	ask(2, a) // voided once out: the voider withdraws it
	posed(2, false)
	ask(3, a) // answered: nobody withdraws it
	posed(3, false)
	if _, ok := tab.takeAnswer(3, a); !ok {
		t.Fatal("the answer to 3 found no question")
	}
	childIDs, ids := tab.voidQuestionsTo(a, "gone")
	if len(childIDs) != 2 || !slices.Equal(ids, []uint64{2}) {
		t.Fatalf("voided %d questions, %v withdrawn by the voider; want 2, [2]", len(childIDs), ids)
	}
	posed(1, true)
	posed(1, false) // once

	ask(4, b) // the same when the child dies
	ask(5, b)
	posed(5, false)
	_, _, void := tab.afterExit(func(*pending) bool { return false }, "gone")
	if len(void) != 1 || void[0].id != 5 || void[0].sess != b {
		t.Fatalf("the child's death left %+v to withdraw, want question 5 of b", void)
	}
	posed(4, true)
	tab.update(func(in *inFlight) {
		if len(in.reverse) != 0 || len(in.unposed) != 0 {
			t.Errorf("%d questions and %d voided ones left", len(in.reverse), len(in.unposed))
		}
	})
}
