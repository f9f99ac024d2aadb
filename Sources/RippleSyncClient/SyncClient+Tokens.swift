#if Sync
import Foundation
import RippleSync

extension SyncClient {
    /// Renews the token of connection `number` in-band (an `auth` message) before `current`
    /// expires, with a fresh one from the client's token provider, for as long as that
    /// connection lasts: the socket keeps its subscriptions. A token whose expiry cannot be read
    /// (not three base64url parts with a JSON payload holding `exp`) is not renewed: the node
    /// closes its socket at its expiry, and the client connects again with a new token.
    ///
    /// Each renewal happens after three quarters of the token's remaining life, or a minute
    /// before it expires for tokens that live longer than four minutes; a provider that fails
    /// is asked again at the next such point, and when it returns a token that expires no later,
    /// renewal stops for that connection.
    func renewTokens(on number: Int, current token: String) {
        guard let expires = Self.expiry(ofToken: token) else { return }
        Task { [weak self] in
            var expires = expires
            while true {
                do { try await Task.sleep(for: Self.renewalDelay(until: expires, now: Date())) } catch { return }
                guard let self, await self.isCurrent(number) else { return }
                let renewed: String
                do {
                    renewed = try await self.token()
                } catch {
                    // Asked again later; when the token expires first, the node closes the socket.
                    guard Date() < expires else { return }
                    continue
                }
                guard await self.isCurrent(number), let next = Self.expiry(ofToken: renewed), next > expires else { return }
                await self.send(.auth(token: renewed))
                expires = next
            }
        }
    }

    /// How long to wait before renewing a token that expires at `expires`.
    static func renewalDelay(until expires: Date, now: Date) -> Duration {
        let left = expires.timeIntervalSince(now)
        guard left > 0 else { return .zero }
        let wait = left > 240 ? left - 60 : left * 0.75
        return .milliseconds(Int64(wait * 1000))
    }

    /// The `exp` of a token whose payload is its second base64url part, a JSON object (JSON Web
    /// Tokens, and the node's own `v1.` tokens); `nil` for another kind of token.
    static func expiry(ofToken token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64),
              let payload = try? JSONDecoder().decode(ExpiryPayload.self, from: data) else { return nil }
        return Date(timeIntervalSince1970: payload.exp)
    }

    private struct ExpiryPayload: Decodable { var exp: Double }
}
#endif
