#if Sync
import Foundation
@testable import RippleServer
import RippleSync
import RippleSyncTesting
import RippleTesting
import Testing

/// JSON Web Tokens end to end on a node: keys from a JWKS served over HTTP on 127.0.0.1, a key
/// rotated while sockets are open, refusals on the wire with their codes, claims in rules, and
/// in-band renewal.
@Suite(.serialized, .timeLimit(.minutes(15))) struct JWTSyncTests {
    static let rules = #"""
        {"tables": {
            "invoices": {"read": {"column": "org_id", "op": "=", "value": {"claim": "org_id"}}},
            "projects": {"read": {"column": "org_id", "op": "in", "value": {"claim": "orgs"}}}
        }}
        """#

    static let issuer = "https://idp.test/"

    /// Claims of `user` (in `org`, seeing the projects of `orgs`), expiring at `exp` (an hour from
    /// now by default).
    static func claims(_ user: String, org: String? = "a", orgs: [String] = ["a"], exp: Int? = nil,
                       extra: [String: Any] = [:]) -> [String: Any] {
        var claims: [String: Any] = ["sub": user, "iss": issuer, "aud": "ripple", "orgs": orgs,
                                     "exp": exp ?? Int(Date().timeIntervalSince1970) + 3600]
        if let org { claims["org_id"] = org }
        claims.merge(extra) { $1 }
        return claims
    }

    /// A node whose tokens come from a JWKS serving `keys` (no v1. secret), with invoices and
    /// projects of orgs a, b and c.
    func withNode(_ keys: [TestSigningKey], _ body: (ThrowawayPostgres, TestNode, TestJWKSServer) async throws -> Void) async throws {
        try await TestJWKSServer.with(keys) { jwks in
            try await withThrowawayPostgres { postgres in
                try await postgres.psql("""
                    CREATE TABLE invoices(id int8 PRIMARY KEY, org_id text NOT NULL, amount int8);
                    CREATE TABLE projects(id int8 PRIMARY KEY, org_id text NOT NULL, name text);
                    INSERT INTO invoices VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
                    INSERT INTO projects VALUES (1, 'a', 'alpha'), (2, 'b', 'beta'), (3, 'c', 'gamma');
                    """)
                let directory = try TemporaryDirectory()
                var jwt = JWTConfiguration(keys: [.jwksURL(jwks.url)])
                jwt.issuer = Self.issuer
                jwt.audience = "ripple"
                jwt.leeway = .zero
                jwt.minimumRefetchInterval = .zero
                let adjust: (inout SyncServerConfiguration) -> Void = { configuration in
                    configuration.jwt = jwt
                    configuration.secret = []
                }
                try await TestNode.with(postgres, tables: ["invoices", "projects"], rules: Self.rules, directory: directory,
                                        adjust: adjust) { node in
                    try await body(postgres, node, jwks)
                }
            }
        }
    }

    /// Subscribes `id` to `table` (by id) and returns the ids of its first result.
    static func subscribe(_ socket: TestSocket, _ id: String, _ table: String) async throws -> ClientRows {
        try await socket.send(.subscribe(id: id, query: QueryDescription(table: table, order: [OrderDescription(column: "id")]), resume: nil))
        var rows = ClientRows()
        try await rows.readFirstResult(from: socket, id: id)
        return rows
    }

    /// Reads `socket`'s frames until subscription `id`'s rows have the ids `ids`.
    static func read(_ rows: inout ClientRows, from socket: TestSocket, _ id: String, until ids: [Int64]) async throws {
        while rows.rows.map({ $0[0] }) != ids.map(WireValue.integer) {
            guard let message = try await socket.nextSkippingHeartbeats(what: "\(id) to hold \(ids)") else {
                throw SyncClientTestError("the socket closed before \(id) held \(ids); it holds \(rows.rows)")
            }
            if case .error(let code, let text, _) = message { throw SyncClientTestError("\(code.rawValue): \(text)") }
            _ = try rows.take(message, id: id)
        }
    }

    /// The code of the error `socket` gets for `hello` with `token`, once the node closed it.
    static func refusal(of token: String, on node: TestNode) async throws -> SyncErrorCode? {
        try await withSocket(node.url) { socket in
            try await socket.send(.hello(protocol: 1, token: token))
            guard case .error(let code, _, nil)? = try await socket.nextSkippingHeartbeats(what: "the refusal") else { return nil }
            _ = try await socket.closingCode()
            return code
        }
    }

    @Test func aKeyRotatedWhileSocketsAreOpenDropsNoneOfThem() async throws {
        let old = TestSigningKey.es256(kid: "2026-01")
        let new = try TestSigningKey.rs256(kid: "2026-02")
        try await withNode([old]) { postgres, node, jwks in
            try await withSockets { sockets in
                let before = try await sockets.open(node.url)
                #expect(try await before.hello(try old.token(Self.claims("alice"))).user == "alice")
                var beforeRows = try await Self.subscribe(before, "invoices", "invoices")
                #expect(beforeRows.rows.map { $0[0] } == [.integer(1)])
                // The identity provider rotates: the JWKS holds the new key only.
                jwks.serve([new])
                let after = try await sockets.open(node.url)
                #expect(try await after.hello(try new.token(Self.claims("bob"))).user == "bob")
                #expect(jwks.fetches == 2, "fetched again for the new kid")
                var afterRows = try await Self.subscribe(after, "invoices", "invoices")
                // Both sockets go on receiving frames.
                try await postgres.psql("INSERT INTO invoices VALUES (4, 'a', 40)")
                try await Self.read(&beforeRows, from: before, "invoices", until: [1, 4])
                try await Self.read(&afterRows, from: after, "invoices", until: [1, 4])
                // A new socket with a token of the retired key is refused; the open one is not touched.
                #expect(try await Self.refusal(of: try old.token(Self.claims("carol")), on: node) == .tokenUnknownKey)
                try await postgres.psql("INSERT INTO invoices VALUES (5, 'a', 50)")
                try await Self.read(&beforeRows, from: before, "invoices", until: [1, 4, 5])
            }
        }
    }

    @Test func eachAlgorithmIsAcceptedAndBadTokensAreRefusedWithTheirCodes() async throws {
        let keys = [TestSigningKey.hs256(kid: "hs"), try TestSigningKey.rs256(kid: "rs"), TestSigningKey.es256(kid: "es"),
                    TestSigningKey.eddsa(kid: "ed")]
        try await withNode(keys) { _, node, _ in
            for key in keys {
                try await withSocket(node.url) { socket in
                    let welcome = try await socket.hello(try key.token(Self.claims("alice")))
                    #expect(welcome.user == "alice", "\(key.algorithm)")
                }
            }
            let es = keys[2]
            let now = Int(Date().timeIntervalSince1970)
            let refused: [(String, String, SyncErrorCode)] = [
                ("signed by an unknown key", try TestSigningKey.es256(kid: "stranger").token(Self.claims("alice")), .tokenUnknownKey),
                ("the wrong audience", try es.token(Self.claims("alice", extra: ["aud": "another-app"])), .tokenWrongAudience),
                ("expired", try es.token(Self.claims("alice", exp: now - 5)), .tokenExpired),
                ("alg none", JWTVerifierTests.unsigned(Self.claims("alice"), header: ["alg": "none", "kid": "es"]), .tokenUnsupportedAlgorithm),
                ("a forged signature", try TestSigningKey.es256(kid: "es").token(Self.claims("alice")), .tokenBadSignature),
                ("the wrong issuer", try es.token(Self.claims("alice", extra: ["iss": "https://evil.test/"])), .tokenWrongIssuer),
                ("a v1. token on a node without a secret", "v1.eyJleHAiOjE3OTU4NTU3ODUsInN1YiI6ImFsaWNlIn0.c2ln", .unauthorized),
            ]
            for (what, token, code) in refused {
                #expect(try await Self.refusal(of: token, on: node) == code, "\(what)")
            }
            // Each refusal is counted by its code; a code never given stands at 0.
            let metrics = await node.server.metricsText()
            for (what, _, code) in refused {
                #expect(metrics.contains("ripple_refused_tokens_total{code=\"\(code.rawValue)\"} 1\n"), "\(what): \(metrics)")
            }
            #expect(metrics.contains("ripple_refused_tokens_total{code=\"token_not_yet_valid\"} 0\n"), "\(metrics)")
        }
    }

    @Test func claimsInRulesKeepOrgsApartAndNeverShareALiveQueryAcrossThem() async throws {
        let key = TestSigningKey.es256(kid: "k")
        try await withNode([key]) { postgres, node, _ in
            try await withSockets { sockets in
                let alice = try await sockets.open(node.url)
                _ = try await alice.hello(try key.token(Self.claims("alice", org: "a", orgs: ["a", "b"])))
                let bob = try await sockets.open(node.url)
                _ = try await bob.hello(try key.token(Self.claims("bob", org: "b", orgs: ["c"])))
                var aliceInvoices = try await Self.subscribe(alice, "invoices", "invoices")
                let bobInvoices = try await Self.subscribe(bob, "invoices", "invoices")
                let aliceProjects = try await Self.subscribe(alice, "projects", "projects")
                let bobProjects = try await Self.subscribe(bob, "projects", "projects")
                #expect(aliceInvoices.rows.map { $0[0] } == [.integer(1)])
                #expect(bobInvoices.rows.map { $0[0] } == [.integer(2)])
                #expect(aliceProjects.rows.map { $0[0] } == [.integer(1), .integer(2)])
                #expect(bobProjects.rows.map { $0[0] } == [.integer(3)])
                // Same queries, other claims: four live queries; the bases differ.
                #expect(node.server.hub?.liveQueryCount == 4)
                #expect(aliceInvoices.basis != bobInvoices.basis)
                // Carol, of alice's org with alice's orgs, shares alice's live queries.
                let carol = try await sockets.open(node.url)
                _ = try await carol.hello(try key.token(Self.claims("carol", org: "a", orgs: ["a", "b"])))
                let carolInvoices = try await Self.subscribe(carol, "invoices", "invoices")
                #expect(carolInvoices.rows.map { $0[0] } == [.integer(1)] && carolInvoices.basis == aliceInvoices.basis)
                #expect(node.server.hub?.liveQueryCount == 4)
                // A token without the claim a rule needs: the subscription is refused, naming it.
                let dave = try await sockets.open(node.url)
                _ = try await dave.hello(try key.token(Self.claims("dave", org: nil)))
                try await dave.send(.subscribe(id: "invoices", query: QueryDescription(table: "invoices"), resume: nil))
                guard case .error(.forbidden, let message, "invoices")? = try await dave.nextSkippingHeartbeats(what: "the refusal") else {
                    Issue.record("dave's subscription was not refused")
                    return
                }
                #expect(message.contains("org_id"), "\(message)")
                // A new row of org a reaches alice.
                try await postgres.psql("INSERT INTO invoices VALUES (4, 'a', 40)")
                try await Self.read(&aliceInvoices, from: alice, "invoices", until: [1, 4])
            }
        }
    }

    @Test func aSocketRenewsItsTokenInBandAndKeepsItsSubscriptionsPastTheFirstExpiry() async throws {
        let key = TestSigningKey.es256(kid: "k")
        try await withNode([key]) { postgres, node, _ in
            try await withSockets { sockets in
                let socket = try await sockets.open(node.url)
                let firstExpiry = Int(Date().timeIntervalSince1970) + 4
                _ = try await socket.hello(try key.token(Self.claims("alice", exp: firstExpiry)))
                var rows = try await Self.subscribe(socket, "invoices", "invoices")
                let renewedExpiry = Int(Date().timeIntervalSince1970) + 3600
                try await socket.send(.auth(token: try key.token(Self.claims("alice", exp: renewedExpiry, extra: ["name": "Alice"]))))
                guard case .authed(let expires)? = try await socket.nextSkippingHeartbeats(what: "authed") else {
                    Issue.record("the renewal was not answered with authed")
                    return
                }
                #expect(expires == Int64(renewedExpiry))
                try await Wait.until("the first token's expiry to pass", within: .seconds(10)) {
                    Date().timeIntervalSince1970 > Double(firstExpiry) + 1
                }
                try await postgres.psql("INSERT INTO invoices VALUES (4, 'a', 40)")
                try await Self.read(&rows, from: socket, "invoices", until: [1, 4])

                // A renewal for another user: refused, and the socket closes.
                try await socket.send(.auth(token: try key.token(Self.claims("mallory"))))
                guard case .error(.tokenIdentityChanged, _, nil)? = try await socket.nextSkippingHeartbeats(what: "the refusal") else {
                    Issue.record("a renewal for another user was not refused")
                    return
                }
                #expect(try await socket.closingCode() != nil)
            }
        }
    }

    @Test func aRenewalWithOtherRuleClaimsIsRefused() async throws {
        let key = TestSigningKey.es256(kid: "k")
        try await withNode([key]) { _, node, _ in
            try await withSocket(node.url) { socket in
                _ = try await socket.hello(try key.token(Self.claims("alice", org: "a")))
                try await socket.send(.auth(token: try key.token(Self.claims("alice", org: "b"))))
                guard case .error(.tokenIdentityChanged, _, nil)? = try await socket.nextSkippingHeartbeats(what: "the refusal") else {
                    Issue.record("a renewal into another org was not refused")
                    return
                }
            }
        }
    }

    /// Without a renewal, the node closes the socket at the token's expiry with `token_expired`.
    @Test func withoutARenewalTheSocketClosesAtTheTokensExpiry() async throws {
        let key = TestSigningKey.es256(kid: "k")
        try await withNode([key]) { _, node, _ in
            try await withSocket(node.url) { socket in
                _ = try await socket.hello(try key.token(Self.claims("alice", exp: Int(Date().timeIntervalSince1970) + 2)))
                guard case .error(.tokenExpired, _, nil)? = try await socket.nextSkippingHeartbeats(what: "the expiry") else {
                    Issue.record("the socket did not end at its token's expiry")
                    return
                }
            }
        }
    }
}
#endif
