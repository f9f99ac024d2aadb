#if Sync
import ArgumentParser
import Foundation
import RippleServer

/// The `serve` flags for JSON Web Tokens from the app's identity provider.
struct JWTOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A JWKS URL of the identity provider (https://…/.well-known/jwks.json): fetched, cached, and fetched again for a key it lacks.",
                               valueName: "url"))
    var jwksURL: String?

    @Option(help: ArgumentHelp("A file holding a JWK Set (or one JWK) to verify tokens with.", valueName: "file"))
    var jwksFile: String?

    @Option(help: ArgumentHelp("A PEM file holding a public key (RSA for RS256, P-256 for ES256, Ed25519 for EdDSA).", valueName: "file"))
    var jwtKey: String?

    @Option(help: ArgumentHelp("A file holding an HS256 secret (at least 32 bytes) shared with the identity provider.", valueName: "file"))
    var jwtSecretFile: String?

    @Option(help: ArgumentHelp("The iss every token must carry.", valueName: "issuer"))
    var jwtIssuer: String?

    @Option(help: ArgumentHelp("The audience every token's aud must name.", valueName: "audience"))
    var jwtAudience: String?

    @Option(help: ArgumentHelp("The claim holding the user id.", valueName: "claim"))
    var jwtUserClaim = "sub"

    @Option(help: ArgumentHelp("Seconds exp and nbf may be off by (clock skew).", valueName: "seconds"))
    var jwtLeeway = 60

    /// The configuration these flags give; `nil` when no key flag is given (the node takes only
    /// its own `v1.` tokens).
    func configuration() throws -> JWTConfiguration? {
        var keys: [JWTConfiguration.KeySource] = []
        if let jwksURL {
            guard let url = URL(string: jwksURL), ["http", "https"].contains(url.scheme ?? "") else {
                throw ValidationError("--jwks-url must be an http(s) URL")
            }
            keys.append(.jwksURL(url))
        }
        if let jwksFile { keys.append(.jwks(try Data(contentsOf: URL(fileURLWithPath: jwksFile)))) }
        if let jwtKey { keys.append(.pem(try String(contentsOfFile: jwtKey, encoding: .utf8))) }
        if let jwtSecretFile {
            let secret = Array(try String(contentsOfFile: jwtSecretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
            guard secret.count >= 32 else { throw ValidationError("the --jwt-secret-file secret must be at least 32 bytes") }
            keys.append(.secret(secret))
        }
        guard !keys.isEmpty else {
            if jwtIssuer != nil || jwtAudience != nil {
                throw ValidationError("--jwt-issuer and --jwt-audience need a key: --jwks-url, --jwks-file, --jwt-key or --jwt-secret-file")
            }
            return nil
        }
        guard jwtLeeway >= 0, jwtLeeway <= 600 else { throw ValidationError("--jwt-leeway is 0 to 600 seconds") }
        var configuration = JWTConfiguration(keys: keys)
        configuration.issuer = jwtIssuer
        configuration.audience = jwtAudience
        configuration.userClaim = jwtUserClaim
        configuration.leeway = .seconds(jwtLeeway)
        return configuration
    }
}
#endif
