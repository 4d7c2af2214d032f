@_spi(CourierInternals) import CourierCore
import Foundation
import HTTPTypes
import Testing

@testable import Courier

/// TLS chosen per call and per host, a trust evaluator, revocation lists and OCSP stapling,
/// against nginx with the test PKI (`Tests/Support/serve_tls.py`). Kept apart from `TLSTests`:
/// the evaluator needs libcurl on OpenSSL, and the libcurl matrix runs `TLSTests` on a
/// GnuTLS build too.
@Suite struct TLSControlsTests {
    static func body(
        _ api: HTTPSessionManager, _ url: URL, options: RequestOptions = RequestOptions()
    ) async throws
        -> String
    {
        try await TLSTests.text(api, url, options: options)
    }

    static func tls(_ servers: TLSServers, _ name: String) -> URL {
        servers.url(name).appendingPathComponent("tls")
    }

    // MARK: Per call

    @Test func aCallTrustsItsOwnCAAndPresentsItsOwnCertificate() async throws {
        let servers = try await TestServers.tls()
        // The session trusts CA 2 alone: the valid server (CA 1) is refused, unless a call
        // brings CA 1.
        let api = TLSTests.manager {
            $0.tls.certificateAuthorityFile = servers.ca2
            $0.tls.trustsSystemCertificates = false
        }
        #expect(try await Self.body(api, Self.tls(servers, "otherca")).hasPrefix("TLSv1"))
        let refused = await TLSTests.tlsMessage { _ = try await Self.body(api, Self.tls(servers, "valid")) }
        #expect(refused?.contains("not signed by a trusted certificate authority") == true)
        let tenant = TLSConfiguration(certificateAuthorityFile: servers.ca1)
        #expect(try await Self.body(api, Self.tls(servers, "valid"), options: .init(tls: tenant)).hasPrefix("TLSv1"))
        // The call's trust replaces the session's: CA 2's server is not trusted by it.
        let other = await TLSTests.tlsMessage {
            _ = try await Self.body(api, Self.tls(servers, "otherca"), options: .init(tls: tenant))
        }
        #expect(other?.contains("not signed by a trusted certificate authority") == true)

        // A client certificate for one call; the next call, without it, is refused by the
        // server (it does not reuse the first call's connection, which carries the certificate).
        let client = servers.client
        let withIdentity = TLSConfiguration(
            certificateAuthorityFile: servers.ca1,
            clientIdentity: .pem(certificate: URL(fileURLWithPath: client.cert), key: URL(fileURLWithPath: client.key)))
        let mtls = Self.tls(servers, "mtls")
        let answer = try await Self.body(api, mtls, options: .init(tls: withIdentity))
        #expect(answer.contains("SUCCESS CN=courier-client"))
        let without = await capturedError { _ = try await Self.body(api, mtls, options: .init(tls: tenant)) }
        #expect(isCourierError(without) { $0.response?.status.code == 400 })
        #expect(try await Self.body(api, mtls, options: .init(tls: withIdentity)).contains("SUCCESS"))
    }

    @Test func aCallsBadPinIsRefusedBeforeAnythingIsSent() async throws {
        let servers = try await TestServers.tls()
        var tls = TLSConfiguration(certificateAuthorityFile: servers.ca1)
        tls.pinnedPublicKeys["localhost"] = ["not a pin"]
        let message = await TLSTests.tlsMessage {
            _ = try await Self.body(TLSTests.manager(), Self.tls(servers, "valid"), options: .init(tls: tls))
        }
        #expect(message?.contains("is not sha256// followed by the base64") == true)
    }

    // MARK: Per host

    @Test func aHostsConfigurationAppliesToItsNameAndWildcardsToTheirDomain() async throws {
        let servers = try await TestServers.tls()
        let port = servers.port("valid")
        let ca1 = TLSConfiguration(certificateAuthorityFile: servers.ca1)
        let api = TLSTests.manager {
            $0.tls.trustsSystemCertificates = false
            $0.tls.certificateAuthorityFile = servers.ca2
            $0.tls.hosts["*.courier.test"] = ca1
            // api.courier.test and bücher.courier.test both reach the valid server (CA 1).
            $0.addressOverrides = [
                .resolve("api.courier.test", port: port, to: "127.0.0.1"),
                .resolve("xn--bcher-kva.courier.test", port: port, to: "127.0.0.1"),
            ]
        }
        let wildcard = URL(string: "https://api.courier.test:\(port)/tls")!
        #expect(try await Self.body(api, wildcard).hasPrefix("TLSv1"))
        let unicode = URL(string: "https://bücher.courier.test:\(port)/tls")!
        #expect(try await Self.body(api, unicode).hasPrefix("TLSv1"))
        // localhost is no name under courier.test: the session's trust (CA 2) refuses it.
        let message = await TLSTests.tlsMessage { _ = try await Self.body(api, Self.tls(servers, "valid")) }
        #expect(message?.contains("not signed by a trusted certificate authority") == true)

        // The name itself wins over the wildcard.
        let exact = TLSTests.manager {
            $0.tls.hosts["*.courier.test"] = ca1
            $0.tls.hosts["API.courier.test."] = TLSConfiguration(certificateAuthorityFile: servers.ca2)
            $0.addressOverrides = [.resolve("api.courier.test", port: port, to: "127.0.0.1")]
        }
        let refused = await TLSTests.tlsMessage { _ = try await Self.body(exact, wildcard) }
        #expect(refused?.contains("not signed by a trusted certificate authority") == true)

        let bad = TLSTests.manager { $0.tls.hosts["*.*.example"] = ca1 }
        let invalid = await TLSTests.tlsMessage { _ = try await Self.body(bad, Self.tls(servers, "valid")) }
        #expect(invalid == "The TLS host '*.*.example' is not a host name or '*.' and a domain")
    }

    @Test func aHostsEvaluatorAndPinsApplyToThatHostAlone() async throws {
        let servers = try await TestServers.tls()
        let port = servers.port("valid")
        var refusing = TLSConfiguration(certificateAuthorityFile: servers.ca1)
        refusing.serverTrustEvaluator = ServerTrustEvaluator { _ in false }
        var pinnedElsewhere = TLSConfiguration(certificateAuthorityFile: servers.ca1)
        pinnedElsewhere.pinnedPublicKeys["api.courier.test"] = [servers.pin("rotated")]
        // The valid server's certificate names localhost, api.courier.test and bücher.courier.test.
        let api = TLSTests.manager {
            $0.tls.trustsSystemCertificates = false
            $0.tls.certificateAuthorityFile = servers.ca1
            $0.tls.hosts["bücher.courier.test"] = refusing
            $0.tls.hosts["api.courier.test"] = pinnedElsewhere
            $0.addressOverrides = [
                .resolve("api.courier.test", port: port, to: "127.0.0.1"),
                .resolve("xn--bcher-kva.courier.test", port: port, to: "127.0.0.1"),
            ]
        }
        // The session's own trust, no evaluator, no pins: accepted.
        #expect(try await Self.body(api, Self.tls(servers, "valid")).hasPrefix("TLSv1"))
        // The same server by a name whose configuration has an evaluator that refuses all.
        let refused = await TLSTests.tlsMessage {
            _ = try await Self.body(api, URL(string: "https://bücher.courier.test:\(port)/tls")!)
        }
        #expect(refused?.hasPrefix("The server trust evaluator refused") == true)
        // And by a name pinned to another server's key: refused, though its chain is trusted.
        let pinned = await TLSTests.tlsMessage {
            _ = try await Self.body(api, URL(string: "https://api.courier.test:\(port)/tls")!)
        }
        #expect(pinned?.hasPrefix("api.courier.test's public key matches none of the pins for it") == true)
        // The session's own trust still applies to its own name afterwards.
        #expect(try await Self.body(api, Self.tls(servers, "valid")).hasPrefix("TLSv1"))
    }

    // MARK: Evaluator

    @Test func anEvaluatorRefusesAValidChainAndAcceptsASelfSignedOneByItsFingerprint() async throws {
        let servers = try await TestServers.tls()
        let seen = Locked<[ServerTrust]>([])
        let pinned = ServerTrustEvaluator.pinnedCertificates(sha256: [servers.fingerprint("selfsigned").uppercased()])
        let api = TLSTests.trusting(servers) {
            $0.tls.serverTrustEvaluator = ServerTrustEvaluator { trust in
                seen.withLock { $0.append(trust) }
                return pinned.evaluate(trust)
            }
        }
        // The valid server passes the usual check, and the evaluator refuses it.
        let message = await TLSTests.tlsMessage { _ = try await Self.body(api, Self.tls(servers, "valid")) }
        #expect(message?.hasPrefix("The server trust evaluator refused localhost's certificate") == true)
        let valid = try #require(seen.withLock { $0.last })
        #expect(valid.passesDefaultEvaluation)
        #expect(valid.host == "localhost")
        #expect(valid.leaf?.sha256Fingerprint == servers.fingerprint("valid"))

        // The self-signed server fails the usual check, and the evaluator accepts it.
        #expect(try await Self.body(api, Self.tls(servers, "selfsigned")).hasPrefix("TLSv1"))
        let selfSigned = try #require(seen.withLock { $0.last })
        #expect(!selfSigned.passesDefaultEvaluation)
        #expect(selfSigned.defaultEvaluationFailure?.isEmpty == false)
        #expect(selfSigned.certificates.count == 1)

        // Without an evaluator the self-signed server is refused as usual.
        let plain = TLSTests.trusting(servers)
        let refused = await TLSTests.tlsMessage { _ = try await Self.body(plain, Self.tls(servers, "selfsigned")) }
        #expect(refused?.contains("not signed by a trusted certificate authority") == true)
    }

    @Test func anEvaluatorSeesTheUsualHostCheck() async throws {
        let servers = try await TestServers.tls()
        let api = TLSTests.trusting(servers) {
            $0.tls.serverTrustEvaluator = ServerTrustEvaluator { $0.passesDefaultEvaluation }
        }
        #expect(try await Self.body(api, Self.tls(servers, "valid")).hasPrefix("TLSv1"))
        // wronghost's chain is CA 1's, its name another: the usual check fails, so does this.
        let message = await TLSTests.tlsMessage { _ = try await Self.body(api, Self.tls(servers, "wronghost")) }
        #expect(message?.hasPrefix("The server trust evaluator refused") == true)
    }

    /// Each connection holds the evaluator's check only while it lives: once the session has
    /// closed its connections (one accepted and kept open, one refused), the evaluator and what
    /// it captures are gone, not kept for each connection it checked.
    @Test func anEvaluatorGoesWithTheConnectionsItChecked() async throws {
        let servers = try await TestServers.tls()
        let isAlive = try await Self.checkTwiceAndInvalidate(servers)
        // The engines close the connections after the call returns: up to ten seconds on a
        // busy machine, a few milliseconds usually.
        for _ in 0..<1000 where isAlive() { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!isAlive(), "what the evaluator captured outlived the session and its connections")
    }

    /// A session whose evaluator captures an object: one connection accepted, one refused, then
    /// the session invalidated and let go. Returns whether the object is still alive.
    private static func checkTwiceAndInvalidate(_ servers: TLSServers) async throws -> @Sendable () -> Bool {
        let captured = CapturedByEvaluator()
        let api = TLSTests.trusting(servers) {
            $0.tls.serverTrustEvaluator = ServerTrustEvaluator { trust in
                withExtendedLifetime(captured) { trust.passesDefaultEvaluation }
            }
        }
        #expect(try await Self.body(api, Self.tls(servers, "valid")).hasPrefix("TLSv1"))
        let message = await TLSTests.tlsMessage { _ = try await Self.body(api, Self.tls(servers, "wronghost")) }
        #expect(message?.hasPrefix("The server trust evaluator refused") == true)
        api.invalidateAndCancel()
        return { [weak captured] in captured != nil }
    }

    @Test func aCallsOwnEvaluatorDoesNotShareTheSessionsConnections() async throws {
        let servers = try await TestServers.tls()
        var accepting = TLSConfiguration()
        accepting.certificateAuthorityFile = servers.ca1
        accepting.serverTrustEvaluator = ServerTrustEvaluator { $0.passesDefaultEvaluation }
        let api = TLSTests.manager { $0.tls = accepting }
        let url = Self.tls(servers, "valid")
        // A connection to the valid server, accepted by the session's evaluator, stays open...
        #expect(try await Self.body(api, url).hasPrefix("TLSv1"))
        // ...and a call whose evaluator (all else the same) refuses everything does not use it.
        var refusing = accepting
        refusing.serverTrustEvaluator = ServerTrustEvaluator { _ in false }
        let message = await TLSTests.tlsMessage { _ = try await Self.body(api, url, options: .init(tls: refusing)) }
        #expect(message?.hasPrefix("The server trust evaluator refused") == true)
        #expect(try await Self.body(api, url).hasPrefix("TLSv1"))
    }

    // MARK: Revocation

    @Test func aRevocationListRefusesARevokedCertificate() async throws {
        let servers = try await TestServers.tls()
        let plain = TLSTests.trusting(servers)
        #expect(try await Self.body(plain, Self.tls(servers, "revoked")).hasPrefix("TLSv1"))
        let checking = TLSTests.trusting(servers) { $0.tls.certificateRevocationListFile = servers.ca1RevocationList }
        #expect(try await Self.body(checking, Self.tls(servers, "valid")).hasPrefix("TLSv1"))
        let error = await capturedError { _ = try await Self.body(checking, Self.tls(servers, "revoked")) }
        guard case .tls(let context)? = error as? CourierError else {
            Issue.record("expected a tls error, got \(String(describing: error))")
            return
        }
        #expect(context.url?.port == servers.port("revoked"))
    }

    @Test func requiredStaplingAcceptsAGoodResponseAndRefusesRevokedOrNone() async throws {
        let servers = try await TestServers.tls()
        let api = TLSTests.trusting(servers) { $0.tls.requiresOCSPStapling = true }
        #expect(try await Self.body(api, Self.tls(servers, "stapled")).hasPrefix("TLSv1"))
        for name in ["stapledrevoked", "valid"] {
            let error = await capturedError { _ = try await Self.body(api, Self.tls(servers, name)) }
            #expect(isCourierError(error) { _ in true }, "\(name)")
            if case .tls = error as? CourierError {} else { Issue.record("\(name): \(String(describing: error))") }
        }
        // Without the requirement, the server that staples nothing is fine.
        #expect(try await Self.body(TLSTests.trusting(servers), Self.tls(servers, "valid")).hasPrefix("TLSv1"))
    }
}

/// An object an evaluator captures, to see when it goes.
private final class CapturedByEvaluator: Sendable {}
