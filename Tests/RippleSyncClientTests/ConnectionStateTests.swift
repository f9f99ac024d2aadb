#if Sync
import RippleDiffTesting
@testable import RippleSyncClient
import Testing

/// A client connection's state as a pure value: connecting, greeting, welcomed, giving up,
/// backing off and stopping, with the clock and the random source in the test's hands.
@Suite struct ConnectionStateTests {
    typealias Machine = ConnectionState<SeededGenerator>

    static let t0 = ContinuousClock.now
    static let timing = Machine.Timing(minBackoff: .milliseconds(100), maxBackoff: .seconds(2), handshakeTimeout: .seconds(10),
                                       silenceTimeout: .seconds(30), pushRetryInterval: .seconds(5))

    static func machine(addresses: Int = 1, seed: UInt64 = 1) -> Machine {
        Machine(timing: timing, addresses: addresses, random: SeededGenerator(seed: seed), now: t0)
    }

    /// A machine welcomed on its first attempt at `t0`.
    static func welcomed(adopting: Bool = false) -> Machine {
        var machine = machine()
        _ = machine.start(now: t0)
        _ = machine.socketOpened(attempt: 1, now: t0)
        machine.welcomed(now: t0)
        if adopting { _ = machine.clientIDAdopted() }
        return machine
    }

    // MARK: Connecting and greeting

    @Test func startConnectsOnceThenGreetsTheOpenedSocket() {
        var machine = Self.machine()
        #expect(machine.start(now: Self.t0) == .connect(attempt: 1, address: 0))
        #expect(machine.start(now: Self.t0) == .none)
        #expect(machine.isCurrent(1) && !machine.isCurrent(2))
        #expect(machine.socketOpened(attempt: 1, now: Self.t0) == .greet(connection: 1))
        #expect(machine.phase == .greeting(attempt: 1, connection: 1, started: Self.t0))
        #expect(machine.socketOpened(attempt: 1, now: Self.t0) == .closeSocket)
        machine.welcomed(now: Self.t0)
        #expect(machine.isWelcomed && machine.wasWelcomed)
    }

    @Test func aSocketOfAnAttemptGivenUpOnIsClosed() {
        var machine = Self.machine()
        _ = machine.start(now: Self.t0)
        #expect(machine.tick(now: Self.t0 + .seconds(11)) == [.giveUp(reason: "no welcome within 10.0 seconds")])
        #expect(!machine.isCurrent(1))
        #expect(machine.socketOpened(attempt: 1, now: Self.t0 + .seconds(12)) == .closeSocket)
        #expect(machine.connection == 0)
    }

    @Test func aConnectionNotWelcomedWithinTheHandshakeTimeoutIsGivenUpOn() {
        var machine = Self.machine()
        _ = machine.start(now: Self.t0)
        _ = machine.socketOpened(attempt: 1, now: Self.t0 + .seconds(9))
        // The handshake counts from the attempt's start, not the socket's opening.
        #expect(machine.tick(now: Self.t0 + .seconds(10)) == [])
        #expect(machine.tick(now: Self.t0 + .seconds(10) + .milliseconds(1)) == [.giveUp(reason: "no welcome within 10.0 seconds")])
        #expect(machine.phase == .closing(attempt: 1, reason: "no welcome within 10.0 seconds"))
        // A welcome after giving up changes nothing.
        machine.welcomed(now: Self.t0 + .seconds(11))
        #expect(!machine.isWelcomed)
    }

    // MARK: Welcomed

    @Test func aSilentConnectionIsPingedOnceThenGivenUpOn() {
        var machine = Self.welcomed()
        #expect(machine.tick(now: Self.t0 + .seconds(15)) == [])
        #expect(machine.tick(now: Self.t0 + .seconds(16)) == [.ping])
        #expect(machine.tick(now: Self.t0 + .seconds(20)) == [])
        #expect(machine.tick(now: Self.t0 + .seconds(31)) == [.giveUp(reason: "the server was silent for 30.0 seconds")])
    }

    @Test func hearingFromTheServerRearmsThePing() {
        var machine = Self.welcomed()
        #expect(machine.tick(now: Self.t0 + .seconds(16)) == [.ping])
        machine.heard(now: Self.t0 + .seconds(17))
        #expect(machine.tick(now: Self.t0 + .seconds(18)) == [])
        #expect(machine.tick(now: Self.t0 + .seconds(33)) == [.ping])
        #expect(machine.tick(now: Self.t0 + .seconds(40)) == [])
    }

    @Test func adoptingAClientIDPushesFromTheFirstMutation() {
        var reader = Self.welcomed()
        #expect(!reader.canPush)
        #expect(reader.pushFromFirst() == .none)
        var machine = Self.welcomed()
        machine.pushSent(through: 9, now: Self.t0)
        #expect(machine.clientIDAdopted() == .pushPending)
        #expect(machine.canPush && machine.pushedThrough == 0)
        // Not before a welcome.
        var greeting = Self.machine()
        _ = greeting.start(now: Self.t0)
        #expect(greeting.clientIDAdopted() == .none && !greeting.canPush)
    }

    @Test func mutationsUnansweredForTheRetryIntervalArePushedAgain() {
        var machine = Self.welcomed(adopting: true)
        machine.pushSent(through: 40, now: Self.t0 + .seconds(1))
        machine.heard(now: Self.t0 + .seconds(6))
        #expect(machine.tick(now: Self.t0 + .seconds(6)) == [])
        #expect(machine.tick(now: Self.t0 + .seconds(6) + .milliseconds(1)) == [.pushAgainIfPending])
        #expect(machine.tick(now: Self.t0 + .seconds(7)) == [])
        #expect(machine.pushFromFirst() == .pushPending && machine.pushedThrough == 0)
    }

    @Test func anAnswerNamingMutationsToSendAgainMovesThePushPositionBack() {
        var machine = Self.welcomed(adopting: true)
        machine.pushSent(through: 40, now: Self.t0)
        machine.pushAnswered(now: Self.t0, again: 31)
        #expect(machine.pushedThrough == 30)
        machine.pushAnswered(now: Self.t0, again: 35)
        #expect(machine.pushedThrough == 30)
        machine.pushAnswered(now: Self.t0, again: nil)
        #expect(machine.pushedThrough == 30)
        machine.pushUnavailable()
        #expect(!machine.canPush)
    }

    // MARK: Reconnecting

    @Test func theBackoffDoublesAfterAttemptsNotWelcomedAndResetsAfterAWelcome() {
        var machine = Self.machine(addresses: 3)
        var now = Self.t0
        _ = machine.start(now: now)
        var delays: [Duration] = []
        for attempt in 1...7 {
            guard case .reconnect(let wait) = machine.connectionEnded() else {
                Issue.record("no reconnect after attempt \(attempt)")
                return
            }
            delays.append(wait)
            #expect(wait >= machine.delay * 0.5 && wait <= machine.delay)
            now += wait
            // Each attempt takes the next address.
            #expect(machine.backoffElapsed(now: now) == .connect(attempt: attempt + 1, address: attempt % 3))
        }
        #expect(machine.delay == .seconds(2))
        #expect(delays[0] > .milliseconds(99) && delays[0] <= .milliseconds(200))
        _ = machine.socketOpened(attempt: 8, now: now)
        machine.welcomed(now: now)
        guard case .reconnect(let wait) = machine.connectionEnded() else {
            Issue.record("no reconnect")
            return
        }
        #expect(machine.delay == .milliseconds(100) && wait <= .milliseconds(100) && wait >= .milliseconds(50))
    }

    @Test func theJitterComesFromTheRandomSource() {
        func delays(seed: UInt64) -> [Duration] {
            var machine = Self.machine(seed: seed)
            _ = machine.start(now: Self.t0)
            return (0..<5).map { _ in
                guard case .reconnect(let wait) = machine.connectionEnded() else { return .zero }
                _ = machine.backoffElapsed(now: Self.t0)
                return wait
            }
        }
        #expect(delays(seed: 7) == delays(seed: 7))
        #expect(delays(seed: 7) != delays(seed: 8))
    }

    @Test func eventsOutOfPhaseAreIgnored() {
        var machine = Self.machine()
        #expect(machine.connectionEnded() == .none)
        #expect(machine.backoffElapsed(now: Self.t0) == .none)
        #expect(machine.tick(now: Self.t0 + .seconds(100)) == [])
        machine.welcomed(now: Self.t0)
        #expect(!machine.isWelcomed)
        _ = machine.start(now: Self.t0)
        #expect(machine.backoffElapsed(now: Self.t0) == .none)
        machine.checkInvariants()
    }

    // MARK: Stopping

    @Test func stoppingGivesUpOnTheConnectionThenStops() {
        var machine = Self.welcomed(adopting: true)
        #expect(machine.stopRequested() == .none)
        #expect(machine.tick(now: Self.t0) == [.giveUp(reason: "the client stopped")])
        #expect(!machine.canPush)
        #expect(machine.connectionEnded() == .stop)
        #expect(machine.phase == .stopped)
        #expect(machine.start(now: Self.t0) == .connect(attempt: 2, address: 0))
        #expect(!machine.isStopping)
    }

    @Test func stoppingWhileBackingOffOrIdleStopsAtOnce() {
        var machine = Self.machine()
        #expect(machine.stopRequested() == .stop)
        #expect(machine.phase == .stopped)
        _ = machine.start(now: Self.t0)
        _ = machine.connectionEnded()
        #expect(machine.stopRequested() == .stop)
        #expect(machine.backoffElapsed(now: Self.t0) == .none)
        #expect(machine.phase == .stopped)
    }

    @Test func aConnectionThatEndsWhileStoppingStops() {
        for opened in [false, true] {
            var machine = Self.machine()
            _ = machine.start(now: Self.t0)
            if opened { _ = machine.socketOpened(attempt: 1, now: Self.t0) }
            _ = machine.stopRequested()
            #expect(machine.connectionEnded() == .stop)
        }
    }

    // MARK: At random

    /// Seeded random events with a random clock, each checked against the invariants and
    /// against what the actor relies on: a socket is greeted only for the current attempt,
    /// connections and attempts only grow, and a backoff stays within its bounds.
    @Test(arguments: 0..<50) func randomEventsKeepTheInvariants(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var machine = Self.machine(addresses: Int.random(in: 1...3, using: &random), seed: seed)
        var now = Self.t0
        var (attempts, connections) = (0, 0)
        var visited: Set<String> = []
        func visit(_ machine: Machine) { visited.insert("\(machine.phase)".prefix { $0 != "(" }.description) }
        for step in 0..<400 {
            // Now and then a long silence (a server that stopped answering, a suspended device).
            now += .milliseconds(Int64.random(in: 0...3000, using: &random))
            if Int.random(in: 0..<20, using: &random) == 0 { now += .seconds(40) }
            let action: Machine.Action
            var ticked: [Machine.Action] = []
            switch Int.random(in: 0..<12, using: &random) {
            case 0: action = machine.start(now: now)
            case 1: action = machine.socketOpened(attempt: machine.attempt - Int.random(in: 0...1, using: &random), now: now)
            case 2: machine.welcomed(now: now); action = .none
            case 3: machine.heard(now: now); action = .none
            case 4, 5: ticked = machine.tick(now: now); action = .none
            case 6: action = machine.connectionEnded()
            case 7: action = machine.backoffElapsed(now: now)
            case 8: action = machine.clientIDAdopted()
            case 9: machine.pushSent(through: Int64(step), now: now); action = .none
            case 10: machine.pushAnswered(now: now, again: Bool.random(using: &random) ? Int64.random(in: 1...400, using: &random) : nil)
                action = .none
            default: action = Int.random(in: 0..<8, using: &random) == 0 ? machine.stopRequested() : machine.pushFromFirst()
            }
            machine.checkInvariants()
            #expect(machine.attempt >= attempts && machine.connection >= connections, "seed \(seed), step \(step): a count went back")
            (attempts, connections) = (machine.attempt, machine.connection)
            switch action {
            case .connect(let attempt, let address):
                #expect(attempt == machine.attempt && address == (attempt - 1) % machine.addresses && machine.isCurrent(attempt))
            case .greet(let connection):
                #expect(connection == machine.connection && !machine.isWelcomed)
            case .reconnect(let wait):
                #expect(wait >= Self.timing.minBackoff * 0.5 && wait <= Self.timing.maxBackoff, "seed \(seed): a backoff of \(wait)")
            case .stop:
                #expect(machine.phase == .stopped)
            case .pushPending:
                #expect(machine.canPush && machine.pushedThrough == 0)
            case .none, .closeSocket, .giveUp, .ping, .pushAgainIfPending:
                break
            }
            if ticked.contains(where: { if case .giveUp = $0 { true } else { false } }) {
                #expect(ticked.count == 1 && !machine.isCurrent(machine.attempt))
            }
            if ticked.contains(.ping) { #expect(machine.isWelcomed) }
            // Most sockets open and are welcomed promptly: the awkward orders come from the
            // events above, the common one from these.
            if case .connect(let attempt, _) = action, Int.random(in: 0..<10, using: &random) < 7 {
                _ = machine.socketOpened(attempt: attempt, now: now)
                visit(machine)
                if Int.random(in: 0..<10, using: &random) < 7 { machine.welcomed(now: now) }
                machine.checkInvariants()
            }
            if case .greet = action, Bool.random(using: &random) {
                machine.welcomed(now: now)
                machine.checkInvariants()
            }
            visit(machine)
        }
        // The sequence reached the phases it is meant to exercise.
        #expect(visited.isSuperset(of: ["connecting", "greeting", "welcomed", "closing", "backingOff"]), "seed \(seed): \(visited)")
    }
}
#endif
