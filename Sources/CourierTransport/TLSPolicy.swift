import Foundation

/// The TLS choices of a transfer as the engine applies them: a session's or a call's
/// `TLSConfiguration`, made plain.
package struct TLSPolicy: Sendable, Equatable {
    /// Verification on, the system's CAs, nothing else.
    package init() {}

    /// Whether the server's certificate chain and host name are verified.
    package var verifies = true
    /// A CA bundle (PEM) to trust (`CURLOPT_CAINFO`).
    package var caFile: String?
    /// A hashed directory of CA certificates to trust (`CURLOPT_CAPATH`).
    package var caDirectory: String?
    /// Whether the system's CAs stay trusted beside the file or directory above (libcurl's
    /// built-in bundle file and directory for whichever of the two is not given).
    package var trustsSystemCAs = true
    /// The oldest and newest TLS versions allowed; nil: libcurl's (and OpenSSL's) choice.
    package var minimum: TLSVersion?
    package var maximum: TLSVersion?
    /// Public-key pins (`sha256//<base64>` each) by host, normalized (`HostName`).
    package var pins: [String: [String]] = [:]
    /// The certificate and key presented to servers that ask.
    package var clientIdentity: ClientIdentity?
    /// A PEM file of certificate revocation lists (`CURLOPT_CRLFILE`).
    package var revocationListFile: String?
    /// The server must staple a good OCSP response (`CURLOPT_SSL_VERIFYSTATUS`).
    package var requiresStapledStatus = false
    /// Decides the trust of each new connection's chain, in place of libcurl's check.
    package var evaluator: ServerTrustEvaluator?
    /// Other policies for some hosts, by normalized name or `*.` and a normalized suffix.
    package var hosts: [String: TLSPolicy] = [:]

    /// Whether this policy or one of its hosts' has a trust evaluator.
    package var hasEvaluator: Bool { evaluator != nil || hosts.values.contains { $0.evaluator != nil } }

    /// The policy for a request to `host` (normalized): the most specific entry of ``hosts``
    /// (the name itself, then the longest `*.` suffix it ends with), or this one.
    package func forHost(_ host: String?) -> TLSPolicy {
        guard !hosts.isEmpty, let host else { return self }
        if let exact = hosts[host] { return exact }
        var best: (suffix: Int, policy: TLSPolicy)?
        for (pattern, policy) in hosts where pattern.hasPrefix("*.") {
            let suffix = pattern.dropFirst()  // ".example.com"
            if host.hasSuffix(suffix), host.count > suffix.count, suffix.count > (best?.suffix ?? 0) {
                best = (suffix.count, policy)
            }
        }
        return best?.policy ?? self
    }
}
