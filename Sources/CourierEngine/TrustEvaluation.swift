import CCurlShim
import CourierCore
import CourierTransport
import Foundation

/// What the certificate check of one hop's new connections needs: the evaluator and the host
/// the request names. The transfer keeps it for its hop; each connection's `SSL_CTX` keeps it
/// for as long as the connection lives (see `courier_easy_set_trust_context`).
final class TrustContext: @unchecked Sendable {
    let evaluator: ServerTrustEvaluator
    let host: String
    /// The session's shared CA store the connection verifies against (`CAStores`), or nil for
    /// the one libcurl builds.
    let caStore: CAStores.Store?
    /// Why the evaluator refused the last chain it saw. Written and read on the engine thread
    /// (the handshake runs there, inside `curl_multi_socket_action`).
    var refusal: String?

    init(evaluator: ServerTrustEvaluator, host: String, caStore: CAStores.Store?) {
        self.evaluator = evaluator
        self.host = host
        self.caStore = caStore
    }

    /// Whether evaluators can run here: libcurl does TLS with OpenSSL and the check's functions
    /// were found. Sets the check's callbacks the first time.
    static let isAvailable: Bool = {
        guard courier_trust_available() else { return false }
        courier_trust_set_hooks(
            courier_trust_hooks(
                decide: trustDecide, retain: trustRetain, release: trustRelease, ca_store: trustCAStore))
        return true
    }()

    /// The error a refused chain failed the transfer with, in the evaluator's terms.
    func explain(_ error: CourierError) -> CourierError {
        guard let refusal, case .tls = error else { return error }
        return error.withContext { $0.message = refusal }
    }

    /// The chain in `store`, judged by OpenSSL and then by the evaluator. Engine thread.
    fileprivate func decide(_ store: UnsafeMutableRawPointer) -> Bool {
        let isAddress = host.contains(":") || host.allSatisfy { $0.isNumber || $0 == "." }
        let error = host.withCString { courier_trust_default_verdict(store, $0, isAddress) }
        var certificates: [ServerCertificate] = []
        for index in 0..<max(0, courier_trust_certificate_count(store)) {
            let length = courier_trust_certificate(store, index, nil, 0)
            guard length > 0 else { continue }
            var bytes = [UInt8](repeating: 0, count: Int(length))
            guard courier_trust_certificate(store, index, &bytes, length) == length else { continue }
            certificates.append(ServerCertificate(der: Data(bytes), sha256Fingerprint: Self.sha256(bytes)))
        }
        let failure: String? =
            switch error {
            case 0: nil
            case let code where code > 0: String(cString: courier_trust_error_text(code))
            default: "the chain cannot be verified"
            }
        let trust = ServerTrust(
            host: host, certificates: certificates, passesDefaultEvaluation: error == 0,
            defaultEvaluationFailure: failure)
        if evaluator.evaluate(trust) {
            courier_trust_set_verdict(store, 0)
            refusal = nil
            return true
        }
        refusal =
            "The server trust evaluator refused \(host)'s certificate"
            + (failure.map { " (the usual check: \($0))" } ?? " (the usual check passes)")
        // X509_V_ERR_APPLICATION_VERIFICATION (50) when OpenSSL itself found nothing wrong.
        courier_trust_set_verdict(store, error > 0 ? error : 50)
        return false
    }

    /// Lower-case hex SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        guard courier_trust_sha256(bytes, bytes.count, &digest) else { return "" }
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}

private func trustDecide(_ store: UnsafeMutableRawPointer?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let store, let context else { return 0 }
    return Unmanaged<TrustContext>.fromOpaque(context).takeUnretainedValue().decide(store) ? 1 : 0
}

private func trustRetain(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    _ = Unmanaged<TrustContext>.fromOpaque(context).retain()
}

private func trustRelease(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    Unmanaged<TrustContext>.fromOpaque(context).release()
}

private func trustCAStore(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    return Unmanaged<TrustContext>.fromOpaque(context).takeUnretainedValue().caStore?.pointer
}
