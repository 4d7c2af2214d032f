import Foundation

/// What a server presented when a TLS connection was made, as a ``ServerTrustEvaluator`` sees
/// it.
public struct ServerTrust: Sendable {
    /// The host the request names (not an address override's target): the name checked
    /// against the certificate.
    public let host: String
    /// The certificates the server sent, leaf first, in DER.
    public let certificates: [ServerCertificate]
    /// Whether the usual check passes: the chain leads to a trusted CA (the configuration's
    /// CA file, directory and the system's, with a revocation list when one is given) and the
    /// leaf names ``host``.
    public let passesDefaultEvaluation: Bool
    /// Why the usual check fails, in OpenSSL's words; nil when it passes.
    public let defaultEvaluationFailure: String?

    /// A trust value, for testing an evaluator.
    public init(
        host: String, certificates: [ServerCertificate], passesDefaultEvaluation: Bool,
        defaultEvaluationFailure: String? = nil
    ) {
        self.host = host
        self.certificates = certificates
        self.passesDefaultEvaluation = passesDefaultEvaluation
        self.defaultEvaluationFailure = defaultEvaluationFailure
    }

    /// The leaf certificate: the server's own.
    public var leaf: ServerCertificate? { certificates.first }
}

/// One certificate of a server's chain.
public struct ServerCertificate: Sendable, Hashable {
    /// The certificate in DER.
    public let der: Data
    /// The SHA-256 of ``der`` in lower-case hex without separators (what
    /// `openssl x509 -noout -fingerprint -sha256` prints, without its colons, in lower case).
    public let sha256Fingerprint: String

    /// A certificate from its DER and its SHA-256 fingerprint.
    public init(der: Data, sha256Fingerprint: String) {
        self.der = der
        self.sha256Fingerprint = sha256Fingerprint
    }
}

/// Decides whether a server's certificate chain is trusted: in place of the usual check, which
/// it sees the verdict of (``ServerTrust/passesDefaultEvaluation``).
///
/// ```swift
/// // Trust a self-signed certificate by its fingerprint, and nothing else.
/// configuration.tls.serverTrustEvaluator = .pinnedCertificates(sha256: ["9f86d081884c7d65…"])
/// // Add a rule to the usual check.
/// configuration.tls.serverTrustEvaluator = ServerTrustEvaluator { trust in
///     trust.passesDefaultEvaluation && trust.certificates.count >= 2
/// }
/// ```
///
/// It runs on the session's engine thread during the handshake, once per new connection (not
/// for a request on a connection already open), so it must return quickly and not block. It
/// needs libcurl built with OpenSSL; with another TLS library a request fails with
/// `CourierError.tls` before it is sent. Two evaluators are equal when one is a copy of
/// the other.
public struct ServerTrustEvaluator: Sendable, Hashable {
    private final class Box: Sendable {
        let evaluate: @Sendable (ServerTrust) -> Bool
        init(_ evaluate: @escaping @Sendable (ServerTrust) -> Bool) { self.evaluate = evaluate }
    }

    private let box: Box

    /// An evaluator that accepts a chain when `evaluate` returns true.
    public init(_ evaluate: @escaping @Sendable (ServerTrust) -> Bool) {
        box = Box(evaluate)
    }

    /// Accepts a server whose leaf certificate has one of these SHA-256 fingerprints (hex, in
    /// either case, colons allowed, as `openssl x509 -fingerprint -sha256` prints them), and
    /// refuses every other, whether the usual check passes or not.
    public static func pinnedCertificates(sha256 fingerprints: [String]) -> ServerTrustEvaluator {
        let accepted = Set(fingerprints.map(normalizedFingerprint))
        return ServerTrustEvaluator { trust in trust.leaf.map { accepted.contains($0.sha256Fingerprint) } ?? false }
    }

    /// Lower-case hex without separators.
    package static func normalizedFingerprint(_ text: String) -> String {
        text.lowercased().filter { $0 != ":" && !$0.isWhitespace }
    }

    /// Whether the evaluator accepts `trust`.
    public func evaluate(_ trust: ServerTrust) -> Bool { box.evaluate(trust) }

    /// The same evaluator (a copy of one value).
    public static func == (lhs: ServerTrustEvaluator, rhs: ServerTrustEvaluator) -> Bool { lhs.box === rhs.box }

    /// Hashes the evaluator's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(box)) }
}
