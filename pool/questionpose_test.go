package pool

import (
	"testing"
)

// A child's question voided while its asker is still delivering it
// (between the question's record and its delivery) is withdrawn after
// it, never before: the client must not get the withdrawal before the
// question, which would then stay open. Its session's own void (a close,
// a closed input) takes it, with what to wait for before withdrawing it:
// the close must write the withdrawal before the session's stream ends,
// which the asker, finding the session closed, could not. The child's
// death leaves it to the asker. Once delivered, the one that voids it
// withdraws it at once; an answered question is withdrawn by nobody.
func TestQuestionVoidedAsItGoesOutIsWithdrawnAfterIt(t *testing.T) {
	tab := newRequestTable(nil)
	a, b := &session{closed: make(chan struct{})}, &session{closed: make(chan struct{})}
	posing := map[uint64]chan<- struct{}{}
	ask := func(id uint64, s *session) {
		t.Helper()
		if posing[id] = tab.addQuestion(id, []byte("c"), s, "", true, ""); posing[id] == nil {
			t.Fatalf("question %d not recorded", id)
		}
	}
	posed := func(id uint64, wantVoid bool) {
		t.Helper()
		close(posing[id])
		why, void := tab.posed(id)
		if void != wantVoid || void && why != "gone" {
			t.Fatalf("question %d delivered: void %t (%q), want %t", id, void, why, wantVoid)
		}
	}

	ask(1, a) // voided as it goes out: the voider withdraws it once it is out
	ask(2, a) // voided once out: the voider withdraws it
	posed(2, false)
	ask(3, a) // answered: nobody withdraws it
	posed(3, false)
	if _, ok := tab.takeAnswer(3, a); !ok {
		t.Fatal("the answer to 3 found no question")
	}
	childIDs, open := tab.voidQuestionsTo(a)
	if len(childIDs) != 2 || len(open) != 2 {
		t.Fatalf("voided %d questions, %+v withdrawn by the voider; want 2, 2", len(childIDs), open)
	}
	for _, q := range open {
		switch {
		case q.sess != a:
			t.Fatalf("question %d withdrawn at another session", q.id)
		case q.id == 2 && q.posing != nil:
			t.Fatal("the delivered question 2: its withdrawal waits")
		case q.id == 1 && q.posing == nil:
			t.Fatal("question 1, going out: its withdrawal does not wait for it")
		case q.id == 1:
			select {
			case <-q.posing:
				t.Fatal("question 1's withdrawal may go before it is out")
			default:
			}
		}
	}
	posed(1, false) // the voider's now, not the asker's
	for _, q := range open {
		if q.id == 1 {
			<-q.posing // out
		}
	}

	ask(4, b) // the child's death leaves one going out to its asker
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
