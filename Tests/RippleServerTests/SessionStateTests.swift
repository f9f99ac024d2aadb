#if Sync
import Foundation
import RippleDiffTesting
@testable import RippleServer
import RippleSync
import Testing

/// A socket session's state as a pure value: every phase's answer to every event, the writer's
/// wake-ups and the bounded queue, the clock — without sockets or Postgres.
@Suite struct SessionStateTests {
    /// Tokens, attachments and waiters are plain numbers here.
    typealias Machine = SessionState<Int, Int, Int>

    static let opened = ContinuousClock.now
    static let helloTimeout = Duration.seconds(10)

    static func machine(maxQueuedBytes: Int = 1 << 20, maxSubscriptions: Int = 3) -> Machine {
        Machine(limits: .init(maxQueuedBytes: maxQueuedBytes, maxMessageBytes: 4096, maxSubscriptions: maxSubscriptions,
                              helloTimeout: helloTimeout, heartbeatMilliseconds: 200, opened: opened))
    }

    static func text(_ message: ClientMessage) -> String {
        String(decoding: try! JSONEncoder().encode(message), as: UTF8.self)
    }

    static let query = QueryDescription(table: "todos")

    /// Everything the writer would write now, read as the client reads it.
    static func written(_ machine: inout Machine) -> [ServerMessage] {
        machine.takeFrames(budget: .max).frames.map { try! ServerMessage(json: $0) }
    }

    /// The error codes among `messages`.
    static func codes(_ messages: [ServerMessage]) -> [SyncErrorCode] {
        messages.compactMap { if case .error(let code, _, _) = $0 { code } else { nil } }
    }

    /// A machine welcomed for `alice` at position 0/10 (with a client id unless `reader`).
    static func open(reader: Bool = false, expires: Date = Date().addingTimeInterval(3600), maxQueuedBytes: Int = 1 << 20,
                     maxSubscriptions: Int = 3) -> Machine {
        var machine = machine(maxQueuedBytes: maxQueuedBytes, maxSubscriptions: maxSubscriptions)
        let received = machine.received(text(.hello(protocol: SyncProtocol.version, token: "t", client: reader ? nil : "")))
        guard case .verifyHello(_, let claimed) = received else { fatalError("no hello to verify") }
        let step = machine.hello(verified: .success(SyncIdentity(user: "alice", expires: expires)), claimed: claimed)
        guard case .lookUpClient(let identity, _) = step else { fatalError("hello refused") }
        _ = machine.welcome(identity: identity, client: reader ? nil : ("c1", 7), position: PGOutput.LSN(10))
        _ = written(&machine)
        return machine
    }

    /// `machine` with subscription `id` reserved (and attached with `token` unless `nil`); its generation.
    @discardableResult
    static func subscribe(_ machine: inout Machine, _ id: String, token: Int? = nil) -> Int {
        guard case .subscribe(let subscribed, _, _, let identity) = machine.received(text(.subscribe(id: id, query: query, resume: nil))),
              identity.user == "alice", subscribed == id, case .reserved(let generation) = machine.reserve(id) else { fatalError("not reserved") }
        if let token {
            let kept = machine.attached(id, generation: generation, token: token)
            #expect(kept)
        }
        return generation
    }

    // MARK: Greeting

    @Test func aGreetingSocketAnswersEverythingButHelloWithSayHelloFirst() {
        for message: ClientMessage in [.ping, .unsubscribe(id: "a"), .subscribe(id: "a", query: Self.query, resume: nil),
                                       .push(mutations: [Mutation(id: 1, ops: [])])] {
            var machine = Self.machine()
            guard case .answered(let output) = machine.received(Self.text(message)) else {
                Issue.record("\(message) was not answered")
                continue
            }
            #expect(output == .init(wakeWriter: true))
            #expect(Self.codes(Self.written(&machine)) == [.outOfOrder])
            #expect(machine.phase == .greeting && !machine.isClosing)
        }
    }

    @Test func helloOfAnotherProtocolClosesTheSocket() {
        var machine = Self.machine()
        guard case .answered(let output) = machine.received(Self.text(.hello(protocol: 99, token: "t"))) else {
            Issue.record("not answered")
            return
        }
        #expect(output.wakeWriter && machine.isClosing)
        #expect(Self.codes(Self.written(&machine)) == [.unsupportedProtocol])
        #expect(machine.isDrained)
    }

    @Test func helloAsksForItsTokenToBeVerifiedThenForTheClientID() {
        var machine = Self.machine()
        #expect(machine.received(Self.text(.hello(protocol: SyncProtocol.version, token: "secret", client: "dev")))
                    .isVerify(token: "secret", client: "dev"))
        let expires = Date(timeIntervalSince1970: 2_000_000_000)
        let bob = SyncIdentity(user: "bob", expires: expires)
        guard case .lookUpClient(bob, "dev") = machine.hello(verified: .success(bob), claimed: "dev") else {
            Issue.record("not accepted")
            return
        }
        #expect(machine.phase == .greeting)
        let output = machine.welcome(identity: bob, client: ("dev", 3), position: PGOutput.LSN(0x1_0000_0020))
        #expect(output.wakeWriter)
        #expect(machine.phase == .open(identity: bob, clientID: "dev"))
        guard case .welcome(let welcome) = Self.written(&machine).first else {
            Issue.record("no welcome")
            return
        }
        #expect(welcome.user == "bob" && welcome.lsn == "1/20" && welcome.client == "dev" && welcome.lastMutation == 3)
        #expect(welcome.heartbeatMilliseconds == 200 && welcome.maxSubscriptions == 3 && welcome.maxMessageBytes == 4096)
    }

    @Test func anExpiredOrInvalidTokenClosesTheSocketWithItsCode() {
        for code in [SyncErrorCode.tokenExpired, .unauthorized, .tokenBadSignature, .tokenUnknownKey, .tokenWrongAudience,
                     .tokenUnsupportedAlgorithm] {
            let failure = TokenRefusal(code, "refused")
            var machine = Self.machine()
            guard case .refused(let output) = machine.hello(verified: .failure(failure), claimed: nil) else {
                Issue.record("\(failure) accepted")
                continue
            }
            #expect(output.wakeWriter && machine.isClosing && machine.phase == .greeting)
            #expect(Self.codes(Self.written(&machine)) == [code])
        }
    }

    @Test func aRenewalOfTheSameIdentityKeepsTheSocketAndAnswersAuthed() {
        var machine = Self.open(expires: Date().addingTimeInterval(5))
        Self.subscribe(&machine, "a", token: 1)
        guard case .verifyRenewal("t2") = machine.received(Self.text(.auth(token: "t2"))) else {
            Issue.record("no renewal to verify")
            return
        }
        let later = Date(timeIntervalSince1970: 4_000_000_000)
        let output = machine.renewed(verified: .success(SyncIdentity(user: "alice", expires: later)), ruleClaims: [])
        #expect(output.wakeWriter && !machine.isClosing)
        #expect(machine.phase == .open(identity: SyncIdentity(user: "alice", expires: later), clientID: "c1"))
        #expect(Self.written(&machine) == [.authed(expires: 4_000_000_000)])
        #expect(machine.tokens["a"] == 1)
    }

    @Test func aRenewalForAnotherUserOrOtherRuleClaimsClosesTheSocket() {
        let renewals: [(SyncIdentity, Set<String>)] = [
            (SyncIdentity(user: "bob", expires: .distantFuture), []),
            (SyncIdentity(user: "alice", expires: .distantFuture, claims: ["org_id": .string("other")]), ["org_id"]),
        ]
        for (identity, ruleClaims) in renewals {
            var machine = Self.open()
            _ = machine.renewed(verified: .success(identity), ruleClaims: ruleClaims)
            #expect(machine.isClosing)
            #expect(Self.codes(Self.written(&machine)) == [.tokenIdentityChanged])
        }
        // A claim the rules do not use may change.
        var machine = Self.open()
        _ = machine.renewed(verified: .success(SyncIdentity(user: "alice", expires: .distantFuture, claims: ["name": .string("Al")])),
                            ruleClaims: ["org_id"])
        #expect(!machine.isClosing)
    }

    @Test func aRefusedRenewalClosesTheSocketWithItsCode() {
        var machine = Self.open()
        _ = machine.renewed(verified: .failure(TokenRefusal(.tokenBadSignature, "no")), ruleClaims: [])
        #expect(machine.isClosing)
        #expect(Self.codes(Self.written(&machine)) == [.tokenBadSignature])
    }

    @Test func noHelloWithinTheTimeoutClosesTheSocket() {
        var machine = Self.machine()
        let now = Self.opened + .seconds(3)
        #expect(machine.clockFired(now: now, date: Date()) == .sleep(until: now + .seconds(1)))
        let late = Self.opened + Self.helloTimeout - .milliseconds(200)
        #expect(machine.clockFired(now: late, date: Date()) == .sleep(until: Self.opened + Self.helloTimeout))
        guard case .closing(let output) = machine.clockFired(now: Self.opened + Self.helloTimeout, date: Date()) else {
            Issue.record("not closed")
            return
        }
        #expect(output.wakeWriter)
        #expect(Self.codes(Self.written(&machine)) == [.outOfOrder])
        #expect(machine.clockFired(now: Self.opened + .seconds(60), date: Date()) == .stop)
    }

    @Test func aMessageBeyondTheLimitOrUnreadableIsAnsweredWithoutClosing() {
        for phaseOpen in [false, true] {
            var machine = phaseOpen ? Self.open() : Self.machine()
            guard case .answered = machine.received(String(repeating: " ", count: 4097)),
                  case .answered = machine.received("{not json") else {
                Issue.record("not answered")
                continue
            }
            let codes = Self.codes(Self.written(&machine))
            #expect(codes.first == .messageTooLarge && codes.count == 2 && !machine.isClosing)
        }
    }

    @Test func aBinaryFrameIsAnsweredAsMalformedInEveryPhase() {
        for phaseOpen in [false, true] {
            var machine = phaseOpen ? Self.open() : Self.machine()
            #expect(machine.receivedBinary().wakeWriter)
            #expect(Self.codes(Self.written(&machine)) == [.malformed] && !machine.isClosing)
        }
    }

    // MARK: Open

    @Test func anOpenSocketRefusesASecondHelloAndAnswersPingWithItsPosition() {
        var machine = Self.open()
        guard case .answered = machine.received(Self.text(.hello(protocol: SyncProtocol.version, token: "t"))),
              case .answered = machine.received(Self.text(.ping)) else {
            Issue.record("not answered")
            return
        }
        let messages = Self.written(&machine)
        #expect(Self.codes(messages) == [.outOfOrder])
        guard case .pong(let lsn) = messages.last else {
            Issue.record("no pong")
            return
        }
        #expect(lsn == "0/A")
    }

    @Test func subscribeChecksTheIdThenReservesItOnce() {
        var machine = Self.open(maxSubscriptions: 2)
        guard case .answered = machine.received(Self.text(.subscribe(id: "", query: Self.query, resume: nil))),
              case .answered = machine.received(Self.text(.subscribe(id: String(repeating: "x", count: 257), query: Self.query,
                                                                     resume: nil))) else {
            Issue.record("a bad id was not answered")
            return
        }
        #expect(Self.codes(Self.written(&machine)) == [.malformed, .malformed])
        let first = Self.subscribe(&machine, "a")
        #expect(machine.reserve("a") == .refused(.init(wakeWriter: true)))
        let second = Self.subscribe(&machine, "b")
        #expect(second > first)
        #expect(machine.reserve("c") == .refused(.none))   // the writer is woken already
        #expect(Self.codes(Self.written(&machine)) == [.duplicateSubscription, .tooManySubscriptions])
    }

    @Test func unsubscribeReleasesTheTokenOrAnAttachingReservation() {
        var machine = Self.open()
        let generation = Self.subscribe(&machine, "a")
        Self.subscribe(&machine, "b", token: 22)
        guard case .unsubscribed(nil) = machine.received(Self.text(.unsubscribe(id: "a"))),
              case .unsubscribed(22?) = machine.received(Self.text(.unsubscribe(id: "b"))),
              case .answered(let output) = machine.received(Self.text(.unsubscribe(id: "b"))) else {
            Issue.record("unexpected answers")
            return
        }
        #expect(output.wakeWriter)
        #expect(Self.codes(Self.written(&machine)) == [.unknownSubscription])
        // The attachment of the unsubscribed "a" ends: its token is not kept.
        let kept = machine.attached("a", generation: generation, token: 11)
        #expect(!kept)
        #expect(machine.tokens.isEmpty && machine.frames.subscriptions.isEmpty)
    }

    @Test func aResubscriptionUnderTheSameIdIgnoresTheOldAttachment() {
        var machine = Self.open()
        let old = Self.subscribe(&machine, "a")
        _ = machine.received(Self.text(.unsubscribe(id: "a")))
        let new = Self.subscribe(&machine, "a")
        let (oldKept, newKept) = (machine.attached("a", generation: old, token: 1), machine.attached("a", generation: new, token: 2))
        #expect(!oldKept && newKept)
        #expect(machine.tokens == ["a": 2])
    }

    @Test func aRefusedResumeTellsTheClientToRetryUnlessItLeft() {
        var machine = Self.open()
        let a = Self.subscribe(&machine, "a")
        let b = Self.subscribe(&machine, "b")
        _ = machine.received(Self.text(.unsubscribe(id: "b")))
        #expect(machine.resumeRefused("a", generation: a).wakeWriter)
        #expect(machine.resumeRefused("b", generation: b) == .none)
        #expect(Self.codes(Self.written(&machine)) == [.retryLater])
        #expect(machine.frames.subscriptions.isEmpty)
    }

    @Test func pushNeedsAClientID() {
        var reader = Self.open(reader: true)
        let mutations = [Mutation(id: 1, ops: [])]
        guard case .answered = reader.received(Self.text(.push(mutations: mutations))) else {
            Issue.record("a reader's push was not refused")
            return
        }
        #expect(Self.codes(Self.written(&reader)) == [.unavailable])
        var writer = Self.open()
        guard case .push(let pushed, "c1", "alice") = writer.received(Self.text(.push(mutations: mutations))) else {
            Issue.record("not pushed")
            return
        }
        #expect(pushed.map(\.id) == [1])
        #expect(writer.pushed([]).wakeWriter)
        guard case .pushed = Self.written(&writer).first else {
            Issue.record("no pushed")
            return
        }
    }

    @Test func anEndingEventReleasesTheTokenAndIsSentWithItsVersion() {
        var machine = Self.open()
        let generation = Self.subscribe(&machine, "a", token: 5)
        let changed = machine.file(SubscriptionEvent(version: 3, kind: .changes(WireChangeset()), json: Array("{}".utf8)), subscription: "a",
                                   generation: generation, at: 3)
        let ended = machine.file(SubscriptionEvent(version: 4, kind: .ended(reason: "dropped"), json: []), subscription: "a",
                                 generation: generation, at: 4)
        #expect(!changed && ended)
        #expect(machine.tokens.isEmpty && machine.frames.subscriptions.isEmpty)
        // Nothing goes before its version finished; then one frame per version, in order.
        #expect(machine.flush(upTo: 2, position: { PGOutput.LSN(UInt64($0) * 100) }) == .none)
        #expect(machine.flush(upTo: 4, position: { PGOutput.LSN(UInt64($0) * 100) }).wakeWriter)
        let messages = Self.written(&machine)
        #expect(messages.count == 1)
        #expect(Self.codes(messages) == [.subscriptionEnded])
    }

    @Test func heartbeatsGoOnlyToOpenSocketsBehindThePosition() {
        var greeting = Self.machine()
        #expect(greeting.heartbeat(version: 5, position: PGOutput.LSN(50), positions: { _ in PGOutput.LSN(50) }) == .none)
        var machine = Self.open()
        #expect(machine.heartbeat(version: 5, position: PGOutput.LSN(50), positions: { _ in PGOutput.LSN(50) }).wakeWriter)
        #expect(machine.heartbeat(version: 5, position: PGOutput.LSN(50), positions: { _ in PGOutput.LSN(50) }) == .none)
        guard case .heartbeat(let lsn) = Self.written(&machine).first else {
            Issue.record("no heartbeat")
            return
        }
        #expect(lsn == "0/32")
    }

    @Test func anExpiredTokenClosesAnOpenSocket() {
        let expires = Date(timeIntervalSince1970: 1_000_000)
        var machine = Self.open(expires: expires)
        let now = ContinuousClock.now
        #expect(machine.clockFired(now: now, date: expires - 10) == .sleep(until: now + .milliseconds(10_001)))
        #expect(machine.clockFired(now: now, date: expires - 7200) == .sleep(until: now + .milliseconds(3_600_001)))
        guard case .closing = machine.clockFired(now: now, date: expires) else {
            Issue.record("not closed")
            return
        }
        #expect(Self.codes(Self.written(&machine)) == [.tokenExpired])
        #expect(machine.clockFired(now: now, date: expires) == .stop)
    }

    // MARK: The writer, backpressure and closing

    @Test func theWriterIsWokenOncePerBatchAndAgainAfterItEmptiedTheQueue() {
        var machine = Self.open()
        #expect(machine.send(.pong(lsn: "0/1")).wakeWriter)
        #expect(!machine.send(.pong(lsn: "0/2")).wakeWriter)
        #expect(Self.written(&machine).count == 2)
        #expect(machine.send(.pong(lsn: "0/3")).wakeWriter)
        // A socket that starts closing wakes its writer even when woken.
        #expect(machine.closeAfter(.error(code: .retryLater, message: "bye", id: nil)).wakeWriter)
        #expect(!machine.isDrained)
        let taken = machine.takeFrames(budget: .max)
        #expect(taken.frames.count == 2 && taken.drained)
    }

    @Test func aBudgetTakesAtLeastOneFrameAndLeavesTheWriterWoken() {
        var machine = Self.open()
        for n in 0..<5 { _ = machine.send(.pong(lsn: "0/\(n)")) }
        let taken = machine.takeFrames(budget: 1)
        #expect(taken.frames.count == 1 && !taken.drained)
        #expect(machine.writerWoken)
        #expect(!machine.send(.pong(lsn: "0/9")).wakeWriter)
    }

    @Test func aSocketThatDoesNotReadIsDroppedOnceWithSlowConsumer() {
        var machine = Self.open(maxQueuedBytes: 100)
        var dropped = 0
        for n in 0..<20 {
            let output = machine.send(.pong(lsn: "0/\(n)"))
            if output.droppedSlowConsumer { dropped += 1 }
        }
        #expect(dropped == 1 && machine.isClosing)
        #expect(Self.codes(Self.written(&machine)) == [.slowConsumer])
        #expect(machine.isDrained)
    }

    @Test func aClosingSocketTakesNoMoreFrames() {
        var machine = Self.open()
        _ = machine.shutDown()
        #expect(machine.send(.pong(lsn: "0/1")) == .none)
        #expect(machine.closeAfter(.pong(lsn: "0/2")) == .none)
        #expect(machine.received(Self.text(.ping)).isAnswered(.none))
        let messages = Self.written(&machine)
        #expect(Self.codes(messages) == [.retryLater] && messages.count == 1)
    }

    @Test func theWriterIsAwaitedOnceAndItsEndResumesTheWaiter() {
        var machine = Self.open()
        let waits = machine.awaitWriter(1)
        #expect(waits)
        #expect(machine.writerFinished() == 1)
        #expect(machine.writerFinished() == nil)
        let waitsAfterTheEnd = machine.awaitWriter(2)
        #expect(!waitsAfterTheEnd)
        var closed = Self.open()
        let closedWaits = closed.awaitWriter(3)
        #expect(closedWaits)
        #expect(closed.close() == 3)
        #expect(closed.isDrained)
    }

    @Test func theSocketsEndReleasesEverythingAndRefusesLateWork() {
        var machine = Self.open()
        let attaching = Self.subscribe(&machine, "a")
        machine.attachStarted(attaching, 100)
        Self.subscribe(&machine, "b", token: 7)
        let waits = machine.awaitWriter(9)
        #expect(waits)
        let released = machine.ended()
        #expect(released.tokens == [7] && released.attachments == [100] && released.waiter == 9)
        #expect(machine.hasEnded && machine.frames.subscriptions.isEmpty)
        let kept = machine.attached("a", generation: attaching, token: 1)
        #expect(!kept)
        #expect(machine.reserve("c") == .refused(.none))
        machine.attachStarted(99, 101)
        #expect(machine.attaching.isEmpty)
        machine.attachEnded(attaching)
        machine.checkInvariants()
    }

    @Test func theDescriptionSaysThePhaseTheMessageHandledAndTheAttachments() {
        var machine = Self.machine()
        #expect(machine.description(at: Self.opened) == "before hello")
        machine = Self.open()
        let generation = Self.subscribe(&machine, "a")
        machine.attachStarted(generation, 1)
        machine.handling("push of 3 mutations", since: Self.opened)
        #expect(machine.description(at: Self.opened + .seconds(2))
                    == "open for alice, handling its push of 3 mutations for 2.0 seconds, 1 subscriptions attaching")
        machine.handling(nil, since: Self.opened)
        #expect(machine.description(at: Self.opened) == "open for alice, 1 subscriptions attaching")
    }

    @Test func aReadingRefusalIsKeptUnlessTheSocketClosesForItsOwnReason() {
        struct Refusal: Error {}
        var refused = Self.open()
        refused.readingFailed(Refusal())
        #expect(refused.ended().refusal is Refusal)
        var closing = Self.open()
        _ = closing.shutDown()
        closing.readingFailed(Refusal())
        #expect(closing.ended().refusal == nil)
    }

    // MARK: At random

    /// Seeded random events, each checked against the invariants and against a model of the
    /// writer: a frame that waits has been announced with a wake-up the writer has not used.
    @Test(arguments: 0..<40) func randomEventsKeepTheInvariants(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var machine = Self.machine(maxQueuedBytes: Int.random(in: 50...2000, using: &random), maxSubscriptions: 3)
        var announced = false
        var generations: [(String, Int)] = []
        var nextToken = 0
        let ids = ["a", "b", "c", "d"]
        var now = Self.opened
        var (opened, closed) = (false, false)
        for step in 0..<300 {
            var output = Machine.Output.none
            switch Int.random(in: 0..<15, using: &random) {
            case 0:
                switch machine.received(Self.text(.hello(protocol: 1, token: "t", client: ""))) {
                case .answered(let answer):
                    output = answer
                case .verifyHello(_, let claimed):
                    let verified: Result<SyncIdentity, TokenRefusal> = Bool.random(using: &random)
                        ? .success(SyncIdentity(user: "u", expires: Date().addingTimeInterval(60)))
                        : .failure(TokenRefusal(.tokenBadSignature, "no"))
                    switch machine.hello(verified: verified, claimed: claimed) {
                    case .refused(let refusal): output = refusal
                    case .lookUpClient(let identity, _):
                        output = machine.welcome(identity: identity, client: ("c", 0), position: PGOutput.LSN(UInt64(step)))
                    }
                default:
                    break
                }
            case 1:
                let message: ClientMessage = [.ping, .unsubscribe(id: ids.randomElement(using: &random)!),
                                              .push(mutations: [Mutation(id: 1, ops: [])]), .auth(token: "t")].randomElement(using: &random)!
                switch machine.received(Self.text(message)) {
                case .answered(let answer): output = answer
                case .push: output = machine.pushed([])
                case .verifyRenewal:
                    // Renewed as the same user, or refused (the socket closes).
                    let renewed: Result<SyncIdentity, TokenRefusal> = Bool.random(using: &random)
                        ? .success(SyncIdentity(user: "u", expires: Date().addingTimeInterval(120)))
                        : .failure(TokenRefusal(.tokenExpired, "no"))
                    output = machine.renewed(verified: renewed, ruleClaims: [])
                default: break
                }
            case 2, 3:
                let id = ids.randomElement(using: &random)!
                switch machine.received(Self.text(.subscribe(id: id, query: Self.query, resume: nil))) {
                case .answered(let answer):
                    output = answer
                case .subscribe:
                    switch machine.reserve(id) {
                    case .reserved(let generation):
                        generations.append((id, generation))
                        machine.attachStarted(generation, generation)
                    case .refused(let refusal): output = refusal
                    }
                default:
                    break
                }
            case 4:
                if let (id, generation) = generations.randomElement(using: &random) {
                    nextToken += 1
                    _ = machine.attached(id, generation: generation, token: nextToken)
                    machine.attachEnded(generation)
                }
            case 5:
                if let (id, generation) = generations.randomElement(using: &random) {
                    output = machine.resumeRefused(id, generation: generation)
                }
            case 6, 7:
                if let (id, generation) = generations.randomElement(using: &random) {
                    let kind: SubscriptionEvent.Kind = Bool.random(using: &random)
                        ? .changes(WireChangeset()) : .ended(reason: "gone")
                    _ = machine.file(SubscriptionEvent(version: Int64(step), kind: kind, json: Array("{}".utf8)), subscription: id,
                                     generation: generation, at: Int64(step))
                }
            case 8:
                output = machine.flush(upTo: Int64(step), position: { PGOutput.LSN(UInt64($0)) })
            case 9:
                output = machine.heartbeat(version: Int64(step), position: PGOutput.LSN(UInt64(step)), positions: { PGOutput.LSN(UInt64($0)) })
            case 10, 11:
                let taken = machine.takeFrames(budget: Int.random(in: 1...500, using: &random))
                for frame in taken.frames { #expect((try? ServerMessage(json: frame)) != nil, "seed \(seed): an unreadable frame") }
                if !machine.frames.hasNext { announced = false }
            case 12:
                now += .seconds(Int64.random(in: 0...4, using: &random))
                if case .closing(let closing) = machine.clockFired(now: now, date: Date()) { output = closing }
            case 13:
                output = Bool.random(using: &random) ? machine.shutDown() : machine.send(.pong(lsn: "0/0"))
            default:
                if Int.random(in: 0..<20, using: &random) == 0 {
                    _ = machine.ended()
                    announced = false
                }
            }
            if output.wakeWriter { announced = true }
            machine.checkInvariants()
            #expect(!machine.frames.hasNext || announced, "seed \(seed), step \(step): a frame waits unannounced")
            if machine.frames.wasDropped { #expect(machine.isClosing) }
            if case .open = machine.phase { opened = true }
            if machine.isClosing { closed = true }
        }
        // The sequence reached the phases it is meant to exercise.
        #expect(opened && closed, "seed \(seed): opened \(opened), closed \(closed)")
    }
}

extension SessionState.Received {
    func isVerify(token: String, client: String?) -> Bool {
        if case .verifyHello(token, client) = self { return true }
        return false
    }

    func isAnswered(_ output: SessionState.Output) -> Bool {
        if case .answered(output) = self { return true }
        return false
    }
}
#endif
