// Package pool is Switchboard's multiplexer: many MCP client sessions share
// one supervised stdio child per configured server.
//
// The pool is a dual-era intermediary. To clients it is an MCP server, to
// each child an MCP client. It knows nothing of the UI or the database:
// they read Snapshot and Subscribe, and the history store receives events
// through Options.Record.
//
// # Where a request lives
//
// A client's request is a pending (requests.go) in its backend's request
// table, which alone holds the requests in flight, their progress tokens
// and the child's own requests to clients, and changes them only in
// closures under its lock. A pending moves new, queued, writing, written,
// done; "may have run" is sticky. Whatever ends it, finish (finish.go)
// ends it, once; the pool's own errors are rows of one table (errors.go);
// every rewrite of a message is a pure function of rewrite.go, which
// TestRewritesStayInRewriteGo holds the other files to.
//
// # Routing table
//
// Each rule, then the functions that implement it. TestRoutingTableNamesRealFunctions
// checks that every name here exists; the cases in testdata/routing
// (TestRouting, on a real pool and a real child) show the rules on the
// wire.
//
//   - Client ids become pool-unique ids on the way in, and the answer
//     carries the client's exact original id bytes back (1, "1" and 1.0 are
//     three ids); an answer with an unknown id (its request ended) is
//     counted and delivered nowhere: [session.forward], [rewriteRequest],
//     [backend.onResponse], [backend.finish], [responseForClient].
//   - Progress tokens are rewritten like ids (a request's pool id is its
//     pool token); progress goes only to the token's owner, with its own
//     token, and never goes back, also across a retry of the call that
//     starts again from zero: [rewriteRequest],
//     [backend.onChildNotification], [requestTable.progress],
//     [requestTable.carryProgress], [progressTokenAt], [poolTokenOf],
//     [progressForClient].
//   - Each child is initialized once (server/discover, else initialize); a
//     client's initialize, server/discover and ping are answered from the
//     cached result: [backend.handshake], [session.initialize],
//     [handshake.initializeResult], [handshake.discoverResult]. Only
//     revisions whose rules the pool keeps are agreed to or listed: not
//     2025-03-26, whose batches the pool refuses (a client asking for it
//     gets 2024-11-05, a child speaking it is presented as 2025-06-18):
//     [handshake.legacyVersion]. A
//     client's request that waits for the handshake (initialize,
//     server/discover, logging/setLevel, subscriptions/listen) is in
//     flight on the child meanwhile, never written to it, and its wait
//     ends by finish like any request, once: answered (from the
//     handshake, or the pool's own answer to a setLevel), or gone on (a
//     setLevel sent on to the child, a request of its own; a listen
//     opened), or as the wait ended (timed out, refused, the session
//     ended, handed back, stopped, cancelled by the user, its server
//     removed or disabled, answered so before a removed server's session
//     ends): [session.awaitHandshakeFor], [session.handshaken],
//     [backend.registerWait], [backend.endWait], [handshakeWait.goOn],
//     [backend.retire], [session.setLogLevel], [session.listen]. It is
//     owed in its shim's ledger while it waits, though not in its
//     session's table: its slot leaves once its answer is written, at once
//     when it is handed back, and goes on with a setLevel sent on to the
//     child: [session.ending], [session.forget]. The child's late answer
//     to the probe the pool stopped waiting for (server/discover, once
//     initialize answered) is no orphan: [backend.dropProbe],
//     [backend.onResponse].
//   - A modern client of a legacy child gets 2026-07-28 answers, each
//     result naming the child in _meta as server/discover does; a legacy
//     client of a modern child gets the _meta the stateless revision
//     requires, and a read of a missing resource as its revision says
//     it: [backend.responseFor], [modernResponse], [legacyResponse],
//     [serverInfoMember], [session.noteModern], [rewriteRequest]. A
//     request's era is its own: an initialize makes its session legacy
//     for good, and a request carrying the 2026-07-28 _meta in a legacy
//     session is served as a modern request, on its own, changing
//     nothing the session's other requests get; one of neither era (no
//     initialize before it, no such _meta) is refused: [session.onRequest],
//     [session.forwardCounted], [session.noteModern]. The
//     child a legacy client's request is written to decides, not the one
//     its session met at its initialize (a config change or a restart
//     can change the era): one made while that child was not known to
//     be modern is fitted as it is written to one: [session.forwardCounted],
//     [backend.readyModern], [fitLine], [fitRequest]. What its initialize said of list
//     changes holds: those a legacy child declared come, from a modern
//     successor untagged through the pool's listen; after a modern
//     child, which offered none, none comes: [handshake.legacyChanges],
//     [session.deliverChange], [backend.union].
//   - A child's tasks (2025-11-25; a 2026-07-28 extension) are offered
//     only to a session whose child is its own (share "session", but not
//     the stateless HTTP session, every modern HTTP client's): a shared
//     child has one client, the pool, and would let every session list,
//     read and cancel every other's. For a shared child the capability is
//     left out of initialize and server/discover, a task-augmented
//     request loses its task (the child runs it as a plain call, as a
//     server that offers no tasks must), a request declares no tasks in
//     its _meta's client capabilities (2026-07-28's extension, which lets
//     a server answer any call with a task; a legacy session's, added by
//     the pool, neither), an answer that is a task all the same is an
//     error (-32603), and a tasks/ request is refused (-32601) before it
//     reaches the child: [session.offersTasks], [backend.offersTasks],
//     [backend.untasked], [withoutTask], [declaresTasks],
//     [withoutTasksDeclared], [untaskedCaps], [backend.unaskedTask],
//     [handshake.initializeResult], [handshake.discoverResult]. An own
//     child's pass through: its notifications/tasks/status go to its
//     session, and a call answered with its task keeps its progress
//     token for the task's life (until a terminal status, its ttl, or
//     room is needed):
//     [backend.keepTaskToken], [backend.taskProgress], [backend.taskStatus].
//   - A client's notifications/cancelled ends its request; the child is
//     told with the pool id. A session that ends has what it had in flight
//     cancelled the same way, and late answers are orphans:
//     [session.onNotification], [backend.cancel], [cancelForChild],
//     [session.close].
//   - Every request ends exactly once, by finish, whatever ends it: its
//     answer, its timeout, a cancel by its client or its user, its
//     session's end, its child's death, a stop, a crash loop, a hand-back,
//     a refusal. The way it ended decides whether the client is answered,
//     whether the child is told, what is counted and what history says;
//     every error the pool answers says whether the request may have run
//     exactly as its state says: [backend.finish], [requestTable.end],
//     [settle], [newError], [Pool.Cancel], [backend.abandon] (endRules).
//     Two ends are of requests no table has, and end through finish's
//     end of a client's request (counted, answered and recorded once by
//     its kind's rule, the child not told): a request held for its
//     session's roots, and a legacy client's call whose 2026-07-28 child's
//     questions wait for the client, ended without its answers, or with
//     answers its retry cannot be made from (-32603, counted as an error):
//     [session.endHeldLocked], [inputRound.giveUp], [inputRound.endCall].
//     A round of such a call that its client answered is recorded, ok,
//     with the event settle made for it as the child asked, only as the
//     call goes on as a new request ([inputRound.retry]).
//   - list_changed goes to every session of the child, resources/updated
//     only to subscribers, and subscriptions are counted so the child sees
//     one subscribe and one unsubscribe; each holder (a session, a listen)
//     counts once, so nothing one sends can release another's stake; a
//     change the pool refuses, or a subscribe the child refuses (the
//     pool's own too: one carrying a session's stake to another child, or
//     a ready child's for every holder of the URI), leaves its holder
//     holding nothing, so its next subscribe reaches the child; so does
//     a subscribe the pool gave up on (its timeout, a cancel, its
//     session's end, a stop: the child is told to drop it, and, as it may
//     have carried it out, one written to a ready child that leaves
//     nobody holding its URI is followed by the pool's own unsubscribe,
//     queued as changes are counted, so that a subscribe counted after it
//     leaves the child subscribed), a holder's own for that holder alone,
//     while the holders that relied on it keep theirs and a ready child
//     hears the pool's own subscribe for them in its place, which they
//     wait for next (one of the pool's own it gives up on takes back
//     every stake that relied on it, as a refusal does, and is not sent
//     again); a holder loses only the stake the ended subscribe took, not
//     one taken again since; a session that loses a stake forgets it,
//     and so does its shim (unless the session subscribed to that URI
//     again since the loss: a stake it took again is kept; a subscribe
//     again while it still held it, no change, or a change of another
//     URI keeps nothing); a session's
//     subscribe counted while another
//     holder's of the URI is on its way to the child is answered once the
//     child answered that one (or the one sent in its place), with its
//     refusal if it refused it; a session's stakes follow it to
//     the child of its new roots, and to the
//     child made for it after its child was stopped or replaced (a stop, a
//     config change): counted there as the child is made, by whichever of
//     its sessions' requests makes it, so the child hears them as it
//     becomes ready (a stop starts no child just to hold them; a config
//     change starts at once the child of a partition whose sessions hold
//     some, as their next request would, so that a session that only
//     listens keeps getting changes), and one the session let go as it
//     moved is released there unless the session changed its
//     subscriptions since (then decided again); one still
//     held at a child it no longer routes to is released there as the
//     session next subscribes or unsubscribes, a subscribe going on to the
//     child it routes to now; a session that closes as its stakes move
//     leaves none; a change is counted as it is queued, under one lock, so
//     the child hears the changes in the order they were counted, and a
//     session's changes of one URI (an HTTP client's concurrent POSTs)
//     are counted in the order the session decided them, each waiting,
//     no lock held, for the one before it to be counted; a child
//     becoming ready (the first, or a restarted one) is told what was
//     subscribed until then, queued under the lock that makes it ready,
//     and only a ready child is told of a change as it is made; the
//     changes a dead child was sent are answered, not sent again; so each
//     child hears of each URI once (a subscribe it was told to drop,
//     and the pool's unsubscribe undoing it, aside) and in order:
//     [backend.onChildNotification], [session.deliverChange],
//     [session.subscription], [session.awaitSubTurnLocked], [session.undoSubscription],
//     [backend.countLocked], [backend.subscribeEnded], [backend.answerCounted],
//     [session.dropSubscription], [session.dropSubscriptionSince],
//     [subWait.last], [session.carryStakes],
//     [server.currentLocked], [backend.takeStakes], [session.moveStakes],
//     [server.startForStakes], [backend.send], [backend.changeSubscription],
//     [backend.becomeReady], [backend.reap].
//   - A modern child's subscriptions/listen is one upstream stream for all
//     the sessions that listen, each getting what its own filter asks;
//     reopened for a new union, the old stream stays the source until the
//     child acknowledges the new one, so a change made in between is
//     neither lost nor delivered twice; a reopen the child refuses leaves
//     the old one: [session.listen], [backend.syncUpstream],
//     [backend.routeTagged], [tagNotification]. One the child ends (it
//     answers it, or names it in notifications/cancelled, as a server
//     tears one down on stdio) is reopened, at most maxQuickReopens
//     times in a row when it ends each at once: [backend.upstreamEnded],
//     [backend.listenCancelled]. A session the pool closes while its
//     client is still there (its server removed, the pool stopping or
//     handing it back, its input closed) ends each of its listens with
//     the closing result tagged with the listen's id, then on stdio
//     notifications/cancelled naming it, both written out (bounded as a
//     graceful end's last answers are) before its transport closes; an
//     HTTP listen's stream ends with that result; a session with no
//     listen gets nothing: [session.closeListens],
//     [session.finishOutput]. A listen is acknowledged once the
//     child watches what it asks for: at once when the current upstream
//     listen covers it, else when the child acknowledges the one that
//     does (the listen's changes before that follow its acknowledgement,
//     each said once); if the child refuses that one, or sits on it past
//     the server's request timeout (then cancelled), promising what the
//     current one covers, and if the child dies, what its capabilities
//     honour; a refused one that added one resource is asked again at
//     once without it (left out until nobody asks for it or the child
//     restarts), one that added several with them one at a time (each
//     left out only if its own try is refused), so that another session's
//     resource the child refuses costs no listen its kinds or resources:
//     [backend.awaitUpstream], [backend.nextEnded], [backend.newChild],
//     [backend.unacknowledged], [session.acknowledge]. An open listen
//     follows its session to the child made after a stop or a config
//     change (at once, for a config change), as the session's stakes do
//     (the new child hears it as it becomes ready), and leaves the old
//     one: [session.moveListens],
//     [listener.releaseAt]. On a legacy child it is acknowledged once the
//     child answered the subscribes it relies on, its own or another
//     holder's of the same resource still on its way, promising none it
//     refused, nor one of its own the pool gave up on; a refused
//     subscribe takes back the stake of every holder that relied on it:
//     [subscribed], [backend.subscribeEnded]. A legacy session of the child gets none of it
//     but the list changes its initialize declared (above), and what its
//     own listens ask for: [session.deliverChange]. With the server's annotations trusted it
//     also asks for tool changes, and one forgets the tools' hints as a
//     legacy child's does: [backend.watchesTools], [backend.forgetHintsIf].
//   - The child's own requests (sampling, elicitation) go to one session
//     that declared the capability (for an elicitation, in its mode:
//     form, the mode of one that names none, or URL; an empty
//     elicitation capability is form mode only) and can receive now.
//     A legacy child's question names no call: while any client's
//     request is in flight on that child (written to it: a wait for its
//     handshake, or a request still queued, is no request of the
//     child's; any other counts, a ping, a list or a held call too), it
//     is one of those callers'. When they are of several parties (a
//     session, but each call of the stateless HTTP session, which
//     carries every 2026-07-28 HTTP client's requests), nobody is asked:
//     the child gets -32006 at once saying why, and a warning is logged
//     at most once a minute per backend. When they are one party's, it
//     goes to the party's caller whose request is the oldest among those
//     that can answer it, of either era (a 2026-07-28 call carries it
//     when its own request declared what it needs, below; a younger call
//     never takes an older one's question); when none of them can, to
//     nobody else (the one undeclared 2026-07-28 call that could carry
//     it gets -32021, else the child -32006). Only when none is in
//     flight does it go to the most recently active session that can
//     answer (the routing contract's fallback: the server asks on its
//     own): [backend.routeQuestion], [requestTable.callers],
//     [callerParty], [backend.warnAmbiguous], [backend.recentAnswerer].
//     It goes
//     under a pool id that no other run gives ([Pool.newAskID]: a
//     resumed session's late answer to a question of a pool gone reaches
//     nothing); the answer returns under the child's id, and the
//     child's cancellation names the pool id; with nobody able, the
//     child gets -32006 at once.
//     The question is recorded only while its session is open and not
//     closing (marked before its close drops the session's questions),
//     checked under the lock that drop takes: a session closing as it is
//     picked is picked no more (a question for its call goes to no other
//     session: the child gets -32006), and one that closes later answers
//     the child with an error as it goes:
//     [backend.onChildRequest], [backend.routeQuestion], [session.askable],
//     [requestTable.askers], [requestTable.addQuestion], [backend.detach],
//     [requestForClient], [backend.answerChild], [answerForChild],
//     [childCancelTarget], [cancelledForClient], [session.canAnswer],
//     [questionNeeds], [clientCapsOf]. However the pool drops a question
//     without its client's answer (the child exits, is killed or
//     stopped; the session closes while its client is there, a hand-back
//     before its Farewell included; its client closes its input), it
//     withdraws it there with notifications/cancelled naming its id,
//     once, and not at a session closed already; one voided while its
//     asker still delivers it is withdrawn after it: by its session's
//     close (or closed input), which waits for it to be out and writes
//     the withdrawal before the stream ends, or, when its child died, by
//     the asker:
//     [requestTable.afterExit], [backend.reap], [withdrawVoid],
//     [session.withdrawQuestions], [requestTable.voidQuestionsTo],
//     [requestTable.voidLocked], [requestTable.posed], [cancelForChild].
//     The child's completion of a URL
//     elicitation goes, once, to the session asked it, by its
//     elicitationId, remembered a bounded time, a bounded number and
//     while that session lasts; one no session was asked (a modern
//     call's: 2026-07-28 has no such notification) is dropped:
//     [urlElicitationID], [backend.elicitationCompleted],
//     [requestTable.elicitationAsker], [requestTable.dropQuestionsOf].
//     The answer, the session's close
//     and the HTTP front's looks at a question (below) find it among the
//     children the session has a stake in, those a config change retired
//     included while they finish their calls, a session's own too:
//     [server.backendsOf]. A question asked of a legacy HTTP
//     session whose GET stream then ends waits Options.QuestionGrace
//     (counted from the stream's end) for the client to open one again;
//     past it, it is taken back (an answer the client sends late is
//     dropped, the question no longer its) and asked again as a new
//     question by the same rules, or the child gets -32006 as if the
//     session had closed: [httpSession.parkLocked],
//     [httpSession.takeBack], [backend.ask], [backend.askAgain]. A
//     legacy child is told the elicitation modes the session that
//     started it declared (form mode alone as {}), and a hand-over keeps
//     what it was told: [clientCaps.capabilitiesJSON],
//     [CarriedChild.caps]. A modern client asked through a legacy child
//     gets an input-required result and retries, when its call is the
//     oldest in flight on the child that can answer the question (a
//     younger modern call never carries an older legacy call's
//     question); a question needing what the call's own request did
//     not declare (an elicitation's mode included) fails the call with
//     -32021 when it is the one modern call in flight that can carry a
//     question and no session can answer it:
//     [backend.carryAsMRTR], [backend.failUndeclared], [requestTable.callers],
//     [requiredCapability], [session.resumeMRTR]. A
//     legacy child's -32042 (URL elicitation required, retired by
//     2026-07-28) reaches a modern client's call as an input-required
//     result asking for the URLs, and the retry is a new call; a call
//     that did not declare elicitation in URL mode gets -32021:
//     [backend.urlElicitationForModern], [urlElicitationResponse]. A
//     legacy client asked through a modern child answers the child's
//     questions as requests of the pool's, a URL elicitation with the
//     elicitationId its revision requires; a call the client cancelled
//     meanwhile gets nothing more; one whose client did not declare what
//     a question needs, or cannot be sent it now (an HTTP session with no
//     GET stream open: retryable), fails at once with -32006:
//     [backend.askLegacyClient], [session.answerable],
//     [legacyQuestion], [urlQuestionForLegacy], [session.answerRound],
//     [session.answerIfCurrent], [retryParams].
//     An answer from a session that was not asked the question leaves it
//     as it is, for its own client's answer: [inputRounds.takeFrom].
//     Progress a client reports under a question's progressToken reaches
//     a shared child only from the session asked, while the question
//     waits for its answer: [requestTable.progressAsked], [progressKey].
//   - roots/list is never asked of a client by a child: sessions that
//     declare different roots get different children, and the pool answers
//     roots/list from the partition, with the names the session that made
//     the partition gave its roots (a modern call's is the partition of
//     no roots: its client is never carried roots/list as input_required).
//     While the pool asks a client its
//     roots, the client's messages wait, and then go on in order, whoever
//     ends the ask (its answer, its timer): what the client sends
//     meanwhile waits behind them; a replay takes each message from the
//     queue only as it handles it, and a hand-back takes to the shim those
//     it has not taken: [session.holdForRoots], [session.rootsAnswered],
//     [session.replayHeld], [session.takeHeld], [server.backendFor],
//     [rootsListResult]. A request held is taken as it is read (its
//     arrival), as any request is: in flight in the snapshot, with why
//     it waits, and owed in its shim's ledger; the request it becomes as
//     it goes on (a forward, a wait for the handshake) takes over its
//     pool id and arrival time, its history and timeout counting from
//     then, and its ledger slot; a slot nobody took leaves the
//     ledger once the pool's own answer is written, and a hand-back's at
//     once (the shim gets the line back, not a debt):
//     [session.heldInfos], [arrival.take], [arrival.takeSlot],
//     [session.forwardCounted], [backend.registerWait],
//     [session.releaseWhenWritten]. A user's cancel of a held request
//     takes it out of the queue, the rest held in order, and answers it
//     as finish answers a user's cancel of a request no child had
//     (settle); one a
//     replay has taken and no request table has yet is marked, and the
//     table refuses it, its taker ending it so, never written. A client's
//     notifications/cancelled held behind a request it names, still held
//     or so taken, marks it the same way: it ends as its client's cancel,
//     never written: [Pool.Cancel], [session.cancelHeld],
//     [session.clientCancelsLocked], [session.handedOn],
//     [requestTable.register], [handOnCancel]. A held request ends at its
//     requestTimeout (its server's as it came) even while held, as finish
//     ends one no child was written: -32001, mayHaveExecuted false; it
//     goes on under that timeout, from its arrival, whatever the config
//     says then, and one whose deadline passed as it goes on is refused
//     by its table and expired, never written: [session.holdForRoots],
//     [session.expireHeld], [session.endHeldLocked],
//     [session.forwardCounted], [requestTable.carry],
//     [requestTable.register], [backend.expire]. Held requests are in
//     flight, so they count against the session's share of requests in
//     flight with those at its children: one past it, or under an id in
//     flight, held or not, is refused as it comes, as any request is
//     (-32004, -32600); their lines count against its bytes, as the
//     held notifications' do, and those count against
//     maxHeldNotifications: past either bound a notification is dropped,
//     a request refused, and the pool says so once a session:
//     [session.heldOverLocked]. The queue
//     finds a held request by pool id, by key or by deadline without
//     looking through the others, and one timer per session, at the
//     earliest deadline, times them all: [session.heldRefusalLocked],
//     [session.overCountLocked], [heldQueue.push], [heldQueue.remove],
//     [heldQueue.setDue], [session.armHeldLocked]. The roots/list_changed held behind an ask count
//     as one: however many came, the client is asked once more; a client
//     that closed its input is asked nothing, and an open ask ends then
//     with the roots last answered: [session.inputEnded], [session.askRoots]. A legacy child told of roots gets no client line
//     until it asked roots/list (the answer goes ahead of every client
//     line) and rootsSettle more (a quarter of the time it took to start,
//     when longer, up to 1 s), for it to apply them; the pool's own
//     lines go on. The wait for the ask is bounded by Options.RootsWait
//     while the server's children were not seen to ask once initialized,
//     by twice the time one took once one did; after one that did not,
//     the server's next children are not waited for, until one asks at
//     start: with no client call in flight, or soon after initialized
//     when it was not waited for: [backend.awaitRoots], [rootsSettleFor],
//     [backend.answerRootsList], [backend.learnRootsLocked],
//     [backend.rootsWaited], [requestTable.callsAt], [backend.writeLoop].
//     A session's own child (share "session") is told when its session's
//     roots change (list_changed; the server's first child starts before
//     they are known): its clients' lines wait the same way for its next
//     ask, bounded alike; that ask, or its absence, says nothing of how
//     the server's children start: [server.rootsChanged],
//     [backend.tellRootsChanged].
//   - A log message reaches only the session it belongs to.
//     logging/setLevel is per session: a legacy child gets the most
//     verbose level any session asked for, a child its sessions come to
//     (new roots, a stop, a config change) as it becomes ready, and each
//     session only the messages its own level admits; a setLevel the
//     child answers itself (it declared no logging) is sent it naming
//     that level, not the session's, and counts once the child accepted
//     it: [session.setLogLevel], [backend.syncLogLevel],
//     [backend.sendLevel], [backend.levelEnded], [backend.becomeReady],
//     [session.carryStakes], [session.admitsLog].
//     A legacy child's messages name no request: a 2026-07-28 client is
//     offered no logging by one and gets none of them, and nobody gets
//     one sent while every client request the child runs is a 2026-07-28
//     client's: [handshake.modernView], [backend.routeLog],
//     [requestTable.runsOnlyModern]. A modern child is never sent
//     setLevel (a legacy session's level rides in the _meta of its
//     requests, a modern request's own goes as is), and its message goes
//     to the one client whose requests in flight there asked for it, a
//     stateless request's on its own response, nobody's when several
//     clients' did (stdio ties the message to no request):
//     [session.logsAsked], [requestTable.logOwner], [session.relate],
//     [takesStream].
//   - What reaches a child is what the pool classified: malformed lines,
//     ambiguous keys and duplicate in-flight ids (of a request sent on,
//     or one the pool answers itself) get an error for that client only;
//     oversize lines are skipped and answered; notifications are
//     re-written from their parsed members: [session.handle],
//     [session.readFrom], [session.forward], [session.refusedInFlightID],
//     [notificationForChild].
//   - Over HTTP, a request's answer, and what relates to it (its progress
//     when the POST takes an event stream, a listen's notifications),
//     reaches the POST that carried it from the request's own record, its
//     exchange: nothing is parsed again to find who asked. A legacy
//     session's other messages go to its GET stream, in order, each an
//     event with an id, routed by what the message's maker tells of it
//     (outFacts: its method, a request's id, the request a withdrawal
//     names), nothing parsed again either: [session.deliver]. With no
//     stream open a notification is dropped,
//     but for a list change (one of each kind waits: [listChange]) and a
//     withdrawal of a request a stream wrote (one of a request no stream
//     wrote takes that request out instead:
//     [httpSession.dropUnwrittenLocked]), and a request waits for the next
//     stream (a child's question only
//     Options.QuestionGrace: above). A stream that ends leaves to
//     the next what it had not written whole (notifications only up to
//     endedStreamBytes, and a list change of each kind), and the
//     requests it wrote that still wait for their answers, except what a
//     resuming client's Last-Event-ID says it has; past
//     Options.SessionQueue notifications are dropped, and a
//     request that finds no room is answered in the client's place with
//     an error; past Options.MaxMessageBytes waiting the client has
//     fallen behind: its stream ends, its notifications dropped:
//     [httpSession.dropNotificationsLocked], [httpSession.toStream],
//     [httpSession.refuse], [httpSession.startStream],
//     [httpSession.keepAsked], [httpSession.endStream], [stillAsked]. Every
//     2026-07-28 request POSTed to a server is an exchange on that
//     server's one stateless session, an Mcp-Session-Id it carries
//     ignored, under a key of its own (clients'
//     ids and tokens collide there), its own _meta deciding era bridging
//     and MRTR for it alone; closing its response cancels it and nothing
//     else: [modernHTTP], [httpFront.legacy], [httpFront.exchange], [httpFront.await],
//     [session.respond], [session.relate], [requestTable.progress],
//     [session.requestCaps], [requestTable.callers], [session.endExchange],
//     [httpFront.expireIdle]. What relates to a POST's request waits for
//     it in a queue bounded by bytes, written in one write each time; a
//     client that falls behind, or takes no write for streamWriteTimeout,
//     is let go; a legacy session's POSTs together hold at most twice
//     Options.MaxMessageBytes unread (answers and related messages, until
//     written), and a response whose message would pass that is let go
//     the same way: [heldBudget.admit], [exchange.settle]. A request its
//     client cancelled ends its POST unanswered; an event stream, a
//     POST's or a GET, with nothing to say for streamKeepAlive is sent a
//     comment, and a POST whose answer
//     has not come by then turns into one when its client accepts it (but
//     for the initialize that opens a session), ending as its JSON would
//     have (a session that ends under it, or a rotation of its token,
//     answers it with an error event): [exchange.relate], [postOut.await], [postOut.begin],
//     [postOut.failEarly], [postOut.write], [httpFront.listen],
//     [session.forget], [session.endListen]. A legacy session's id goes
//     out with the successful answer to the initialize that opened it,
//     and the session is kept only once that answer is written: one
//     whose initialize failed, or whose client left first, is closed:
//     [httpFront.legacy], [httpFront.drop]. A rotation of the token ends
//     at once what the old one let in: the legacy sessions opened with it
//     (streams, POSTs, their share of the child) and the 2026-07-28
//     requests that carried it, cancelled at the child, a call held for
//     its client's retry (MRTR) included, whose requestState is unknown
//     from then on: [Pool.HTTPTokenRotated], [httpFront.rotated],
//     [grant.revoked], [mrtrHolds.revoke], [mrtrHolds.put].
//   - A client that closes its input, or whose server is removed, gets
//     its answers before its session ends, those queued for it written
//     out, unless a write waited EvictAfter for it; each removed server's
//     session waits for its own requests alone, and its shim, attached or
//     relaying, is told why it ended (a Farewell), so that it does not
//     take the end for a pool that went away: [server.remove],
//     [endsForGood]. One that stops reading
//     is evicted and stalls no one; one that piles up requests is refused
//     past its share: [session.halfClose], [session.closeWhenIdle],
//     [flushes], [session.finishOutput], [session.deliver], [session.drain],
//     [session.overLimitLocked]. The questions put to a client that closed
//     its input, which it cannot answer, end at once (a legacy child's is
//     answered with an error, a 2026-07-28 child's ends its call), and it
//     is asked no more, nor is another session a legacy child's question
//     that would go to it (it ends -32006): [session.unanswerable],
//     [session.askable], [backend.routeQuestion],
//     [requestTable.voidQuestionsTo], [inputRounds.askedOf]. A
//     2026-07-28 stdio client that closes its input, or leaves, can send
//     no retry of a call held for it (MRTR; over HTTP a retry may come on
//     any connection): the held calls are cancelled at the child at once,
//     and none is held for it after: [session.endHolds],
//     [mrtrHolds.revokeOf], [session.canRetry], [mrtrHolds.put]. One that
//     goes away is cancelled at once:
//     an attached client's shim that hangs up, or its output that loses
//     its reader (one poller watches them all), or a write to its output
//     that fails: [hangups.watch], [hangups.poll], [readerGone]. A
//     shim whose full stream no Farewell gets through is told of its
//     eviction, or its server's removal, when it comes back to resume the
//     session: [endedSessions.add], [endedSessions.take]. An attached shim that
//     stops reading its connection is as a client that stops reading: the
//     first line it does not take (shimWriteTimeout) evicts its session,
//     no more is written to it, and a flush or a stop waits for one such
//     write at most: [shimLines.writeLines], [shimLines.hurry].
//   - The answers that one read from a child brought reach each stdio
//     session in one write, behind anything queued for it before and
//     ahead of anything after; a read's only answer is written at once,
//     and a client that takes part of the write has the rest written
//     first by its drain, never waited for: [outBatch.holds],
//     [outBatch.flush], [outBatch.writeQueued].
//   - A request times out (its deadline set where it is registered, one
//     timer per table for all of them) with an error to its client and a
//     cancellation to the child; a changed requestTimeout applies to
//     requests registered after it, and the error names the timeout the
//     request ran under; a request whose deadline passed before it came
//     (held for its session's roots) is refused, never queued; a call
//     held for a 2026-07-28 client's answer to its child's question has
//     its timeout paused from the question to the answer, a wait bounded
//     by how long a held call is kept for its retry, past which it ends
//     saying the client did not answer, or by its own timeout if that
//     ends later: a pause never brings a deadline forward, and a call
//     that reaches its own deadline paused ends with the usual timeout
//     error: [requestTable.register],
//     [requestTable.sweepDue], [backend.expire], [requestTable.timeoutOf],
//     [requestTable.hold], [requestTable.takeOver]. A legacy child's
//     elicitation or sampling relayed to a legacy session pauses the
//     same way, with the same bound, the timeouts of that session's
//     calls written to the child (the question names no call), until it
//     is answered, withdrawn by the child, dropped with its session or
//     voided by the child's death; overlapping questions pause until the
//     last ends; roots/list, which the pool answers at once, pauses
//     nothing: [personAnswers], [requestTable.addQuestion],
//     [requestTable.pauseCallsLocked], [requestTable.forgetQuestionLocked],
//     [requestTable.pauseLocked], [requestTable.resumeLocked],
//     [requestTable.ownDeadline]. A legacy
//     client's call to a 2026-07-28 child keeps one timeout over its
//     rounds of questions: while the pool asks the client an elicitation
//     or a sampling it waits, with the same bound, past which the call
//     ends saying the client did not answer; the retry with the answers
//     goes on with what was left, and its error names the call's timeout
//     and, though the retry may not have reached the child, says the call
//     may have executed (its first round did);
//     the questions end with the call (cancelled, its client gone):
//     [backend.askLegacyClient], [requestTable.carry], [inputRound.retry],
//     [backend.finish], [mayHaveExecuted], [backend.cancel]. While they
//     wait, no child has the call, but it is in flight in the snapshot
//     under its last round's pool id, received and written as its
//     client's call first was, saying it waits for the client's answer,
//     and a user's cancel ends it as its questions' end does, answering
//     the user's cancel, or, under that id once the client answered, its
//     next round: [inputRounds.infos], [inputRounds.ofCall],
//     [inputRound.end], [Pool.Cancel], [goneOn]. However the
//     round ends without the client's answers (that cancel, its timer,
//     the client's cancel, the pool closing the session while the client
//     is there), the questions still open are withdrawn at the client
//     with notifications/cancelled, after they went out; those of a round
//     that ended before they went out are not sent; the round's row
//     in history ends with the round, as it ended, and is counted as any
//     call's end of that kind (settle): [inputRound.giveUp],
//     [inputRound.withdraw], [session.dropRounds], [inputRound.retry].
//   - At most once: when a child dies, what it had not been written is
//     re-queued, what it had is answered with mayHaveExecuted (once retried
//     if declared safe to repeat, and still "may have run" after that);
//     a crash loop or a stop answers the rest as their state says. What
//     a crash had is answered once the restart budget decided: retryable
//     if the server restarts, with the failure (not retryable) if that
//     crash failed it: [backend.reap], [requestTable.afterExit],
//     [backend.safeToRepeatLocked], [backend.noteCrash],
//     [backend.answerCrashed], [backend.finishStop]. A request is being
//     written only while a write offers it to the child (on Unix one that
//     never waits): what a full pipe did not take goes back to the queue,
//     the rest of a line the child has part of first, so that a request
//     a child that stopped reading took nothing of is still queued: ended
//     then, it did not run, and it is never written after. Its snapshot
//     says why it waits, as does the one the child has part of:
//     [backend.writeLoop], [backend.writeOut], [requestTable.infos].
//   - A shared child with no session for its idleTimeout is stopped, a
//     freshly started one not before its warm-up grace (counted from its
//     process's start, not its slot's: a resolution or a backoff before
//     it does not use it up; each new process gets its own), and one no
//     session joined (started for a client's initialize before its roots
//     were known) after its warm-up grace alone; a session that
//     comes back first keeps it, and a call it still answers (for a
//     session that moved to other roots) is not cut short; a changed
//     idleTimeout applies to a child already idle, counted from when its
//     last session left; a failed child is kept (its server failed until
//     restarted or reconfigured), and restarted with no session counts
//     from then: [idlePolicy.stopAfter], [server.startedLocked], [server.armIdleLocked], [server.processStarted],
//     [server.idleTimerLocked], [server.reapIdle], [server.reconfigure],
//     [server.revived], [requestTable.serving].
//   - A shared server runs at most MaxRootsChildren children: new roots
//     past it take the place of a child with no session (one with no call
//     to answer first), else they are refused: [server.currentLocked],
//     [server.spareLocked], [server.stopReclaimed].
//   - A child that dies is started again after a backoff that doubles up
//     to a cap and starts over once a child is up; MaxRestarts exits within
//     Window fail the server fast until it is restarted or reconfigured:
//     [backend.supervise], [restartBudget.exited], [backend.waitToRestart],
//     [backend.noteCrash].
//   - A user's restart names a server (every child of it, its package
//     looked up again) or one child slot by its BackendInfo.ID (that
//     child alone: another session's own child, or another roots
//     partition's, runs on): [Pool.Restart], [Pool.RestartBackend],
//     [backend.restartNow].
//   - A pool that stops on purpose hands each attached or relaying session
//     back to its shim with the input it had not handled, a message still
//     waiting for its child's handshake included (unanswered: nothing had
//     acted on it); the next pool resumes it and answers what the last one
//     owed (the shim's ledger, or the history): [Pool.handBackSessions],
//     [handBack.handle], [session.awaitHandshake], [session.handOverRelay],
//     [session.resume], [mergeLost], [ledger.take]. An attached shim
//     forgets what it carried once welcomed, so the next pool lists it in
//     the ledger before its Welcome (the owed requests until answered, a
//     cut line until ended, the carried input's requests until the reader
//     handled or handed them back), and answers the owed ones before it
//     waits for a child: [session.claimResume], [resumeClaim.release],
//     [session.answerLost]. The client's
//     initialize is sent to the shim before its answer is written (an
//     attached shim's line is written by then), and a resume that owes
//     it answers it with its result: [session.initialize],
//     [shimLines.flush], [session.answerLostInitialize]. What the client
//     set up in the session since (its log level, its resource
//     subscriptions) is sent to the shim as it changes, in the order of
//     the changes (queued under the session's mu: [session.keepLocked],
//     [session.queueLine]), no one waiting for the shim, and the next
//     pool takes it up before the client's next
//     message, after a stop or a crash; a subscription the session loses
//     (the child refused it, the pool gave up on it or refused it, a
//     resume did not take it up) is taken back from the shim as it is
//     lost: [session.keep], [session.keptSubscriptionLocked], [shimLines.keep],
//     [session.resumeStakes], [session.dropSubscription],
//     [session.undoSubscription], [session.resumeSubscriptions]. A write to the client
//     that the stop cuts short keeps what it did not write: the session's
//     last flush writes it first, from inside the line the cut left, and
//     an answer not written whole stays owed in the ledger, which says
//     when the client's output ends inside a line (the next pool ends
//     it): [session.writeQueued], [taken.cut], [session.finishOutput],
//     [session.releaseWritten]. An attached session's
//     open subscriptions/listen is owed in its ledger while it is open
//     (listens hold at most maxLedgerListens slots: the rest are the
//     requests'), released as it ends (cancelled, closed with its result
//     once that is written, its session gone); a pool killed with it
//     open leaves it for the next, which answers it once with an error
//     saying its stream ended, so that its client listens again:
//     [session.oweListen], [ledger.listen], [session.endListen],
//     [session.closeListens], [session.endListens], [session.resume].
//   - An upgrade carries ready shared children over the exec to the next
//     program, which adopts them without a handshake: [Pool.Handover],
//     [backend.carry], [server.adoptCarriedLocked], [backend.adoptChild].
package pool
