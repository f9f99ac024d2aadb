#if Sync
import Foundation
import RippleServer
import RippleSync
import Testing

/// Claims in rules, without a node: `{"claim": …}` binds the claim's value, an array claim with
/// `in` each element; a missing or mistyped claim is a clear error; write rules take no claims.
@Suite struct ClaimRuleTests {
    static let rules = try! SyncRules(json: Data(#"""
        {"tables": {
            "invoices": {"read": {"column": "org_id", "op": "=", "value": {"claim": "org_id"}}},
            "projects": {"read": {"column": "org_id", "op": "in", "value": {"claim": "orgs"}}},
            "members": {"read": {"column": "role", "op": "in", "values": ["viewer", {"claim": "role"}]}},
            "notes": {"read": {"column": "owner", "op": "=", "value": {"user": true}}}
        }}
        """#.utf8))

    static func identity(_ claims: [String: SyncClaim]) -> SyncIdentity { SyncIdentity(user: "alice", claims: claims) }

    @Test func claimsAreBoundAsValues() throws {
        let alice = Self.identity(["org_id": .string("acme"), "orgs": .array([.string("acme"), .integer(7)]), "role": .string("admin")])
        #expect(try Self.rules.restrict(QueryDescription(table: "invoices"), to: alice).filter
                    == .compare(column: "org_id", op: .equal, value: .text("acme")))
        #expect(try Self.rules.restrict(QueryDescription(table: "projects"), to: alice).filter
                    == .isIn(column: "org_id", values: [.text("acme"), .integer(7)]))
        #expect(try Self.rules.restrict(QueryDescription(table: "members"), to: alice).filter
                    == .isIn(column: "role", values: [.text("viewer"), .text("admin")]))
        #expect(Self.rules.claimsUsed == ["org_id", "orgs", "role"])
        // An empty array claim: `in` nothing.
        #expect(try Self.rules.restrict(QueryDescription(table: "projects"), to: Self.identity(["orgs": .array([])])).filter
                    == .isIn(column: "org_id", values: []))
    }

    @Test func aMissingOrMistypedClaimIsARulesErrorNamingIt() {
        let cases: [(String, SyncIdentity)] = [
            ("invoices", Self.identity([:])),
            ("invoices", Self.identity(["org_id": .array([.string("acme")])])),
            ("invoices", Self.identity(["org_id": .other])),
            ("projects", Self.identity(["orgs": .array([.other])])),
        ]
        for (table, identity) in cases {
            #expect {
                try Self.rules.restrict(QueryDescription(table: table), to: identity)
            } throws: { error in
                (error as? RulesError)?.description.contains(table == "invoices" ? "org_id" : "orgs") == true
            }
        }
        // A table whose rule uses no claim needs none.
        #expect(throws: Never.self) { try Self.rules.restrict(QueryDescription(table: "notes"), to: Self.identity([:])) }
    }

    @Test func aWriteRuleMayNotUseClaims() {
        #expect(throws: RulesError.self) {
            try SyncRules(json: Data(#"{"tables": {"t": {"read": true, "write": {"column": "org", "op": "=", "value": {"claim": "org"}}}}}"#.utf8))
        }
        #expect(throws: RulesError.self) {
            try SyncRules(json: Data(#"{"tables": {"t": {"read": {"column": "org", "op": "in", "value": "acme"}}}}"#.utf8))
        }
    }
}
#endif
