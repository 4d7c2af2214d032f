import Courier
import Foundation
import HTTPTypes
import Testing

/// `TransferMetrics.transactions`: one record per request that went out for a call (redirect
/// hops, retry attempts, the answer to a challenge) or per answer from the cache.
@Suite struct TransactionMetricsTests {
    @Test func everyRedirectHopHasItsOwnRecord() async throws {
        let api = try await httpbinManager()
        let response = try await api.request(.get, "relative-redirect/2", serializer: JSONResponseSerializer())
        let transactions = response.metrics.transactions
        #expect(transactions.map(\.request.path) == ["/relative-redirect/2", "/relative-redirect/1", "/get"])
        #expect(transactions.map { $0.response?.status.code } == [302, 302, 200])
        #expect(transactions.allSatisfy { $0.source == .network && $0.attempt == 1 && $0.failure == nil })
        #expect(transactions.allSatisfy { $0.remoteIP == "127.0.0.1" && $0.remotePort == response.url.port })
        #expect(transactions.allSatisfy { $0.httpVersion == "1.1" && $0.duration > .zero })
        // The figures of the transfer are the final hop's, its duration the hops' together.
        #expect(response.metrics.redirectCount == 2)
        #expect(response.metrics.localPort == transactions[2].localPort)
        #expect(response.metrics.totalDuration == transactions.map(\.duration).reduce(.zero, +))
    }

    @Test func aReusedConnectionReportsItsLocalPort() async throws {
        // One engine, one connection, no cache: the second response comes over the first's
        // connection, and says which (libcurl 7.76 reports -1 for a reused connection; Courier
        // asks the socket then).
        let api = try await faultManager {
            $0.engineCount = 1
            $0.maximumConnectionsPerHost = 1
            $0.cachePolicy = .reloadIgnoringCacheData
        }
        let first = try await api.request(.get, "bytes", parameters: ["n": 16], serializer: DataResponseSerializer())
        let second = try await api.request(.get, "bytes", parameters: ["n": 16], serializer: DataResponseSerializer())
        #expect(first.metrics.reusedConnection == false)
        #expect(second.metrics.reusedConnection == true)
        #expect(first.metrics.localPort > 0)
        #expect(second.metrics.localPort == first.metrics.localPort)
        #expect(second.metrics.transactions.last?.localPort == first.metrics.localPort)
    }

    @Test func everyRetryAttemptHasItsOwnRecord() async throws {
        let name = "transactions-\(UUID().uuidString.prefix(8))"
        let api = try await faultManager {
            $0.interceptors = [RetryPolicy(initialDelay: .milliseconds(1), deadline: nil)]
        }
        let response = try await api.request(.get, "flaky/\(name)?fail=2", serializer: JSONResponseSerializer())
        #expect(response.value["attempt"] == 3)
        let transactions = response.metrics.transactions
        #expect(transactions.map(\.attempt) == [1, 2, 3])
        #expect(transactions.map { $0.response?.status.code } == [503, 503, 200])
        #expect(transactions.allSatisfy { $0.request.path == "/flaky/\(name)?fail=2" && $0.bytesReceived > 0 })
        #expect(response.metrics.redirectCount == 0)
    }

    @Test func attemptsThatFailedWithoutAResponseAreInTheErrorsMetrics() async throws {
        let api = HTTPSessionManager(
            baseURL: URL(string: "http://127.0.0.1:\(try unusedPort())/"),
            configuration: { () -> HTTPSessionConfiguration in
                var configuration = HTTPSessionConfiguration.ephemeral
                configuration.interceptors = [
                    RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1), deadline: nil, budget: nil)
                ]
                return configuration
            }())
        let error = await capturedError {
            _ = try await api.request(.get, "nothing/here", serializer: DataResponseSerializer())
        }
        #expect(isCourierError(error) { if case .cannotConnect = $0 { true } else { false } })
        let transactions = try #require((error as? CourierError)?.context.metrics).transactions
        #expect(transactions.map(\.attempt) == [1, 2, 3])
        #expect(transactions.allSatisfy { $0.response == nil && $0.request.path == "/nothing/here" })
        #expect(transactions.allSatisfy { $0.failure?.contains("127.0.0.1") == true })
    }

    @Test func aResponseThatFailsValidationKeepsItsMetricsInTheError() async throws {
        let api = try await httpbinManager()
        let error = await capturedError {
            _ = try await api.request(.get, "status/418", serializer: DataResponseSerializer())
        }
        let metrics = try #require((error as? CourierError)?.context.metrics)
        #expect(metrics.transactions.map { $0.response?.status.code } == [418])
        #expect(metrics.remoteIP == "127.0.0.1")
    }

    @Test func theRequestThatAnsweredAChallengeHasItsOwnRecord() async throws {
        let base = try await TestServers.httpbin()
        let api = try await httpbinManager()
        // The URL's credential goes out as Basic first; the Digest challenge is then answered.
        let url = "http://ada:secret@\(base.host!):\(base.port!)/digest-auth/auth/ada/secret"
        let response = try await api.request(.get, url, serializer: JSONResponseSerializer())
        #expect(response.value["authenticated"] == true)
        // Three requests: Basic (401, Digest asked for), then libcurl's probe without a
        // credential (401 with a nonce) and its Digest answer (200).
        let transactions = response.metrics.transactions
        #expect(transactions.map { $0.response?.status.code } == [401, 401, 200])
        #expect(transactions[0].response?.headerFields[.wwwAuthenticate]?.hasPrefix("Digest ") == true)
        #expect(transactions.allSatisfy { $0.attempt == 1 })
    }

    /// Every request that went out has its record, the challenge libcurl answers by itself
    /// included: the fault server counts what arrives.
    @Test(arguments: ["store", "url"])
    func eachRequestOfADigestExchangeIsRecorded(credentialFrom: String) async throws {
        let base = try await TestServers.fault()
        let api = try await faultManager()
        let name = "digest-\(credentialFrom)-\(UUID().uuidString.prefix(8))"
        var url = "digest/\(name)"
        if credentialFrom == "store" {
            api.credentials.set(Credential(user: "ada", password: "pw"), for: try #require(ProtectionSpace(url: base)))
        } else {
            url = "http://ada:pw@\(base.host!):\(base.port!)/\(url)"
        }
        let response = try await api.request(.get, url, serializer: StringResponseSerializer())
        #expect(response.value == "digest ok")
        let stats: JSON = try await faultManager().GET("stats/\(name)")
        let arrived = try #require(stats["requests"].intValue)
        let transactions = response.metrics.transactions
        #expect(transactions.count == arrived)
        #expect(transactions.map { $0.response?.status.code } == Array(repeating: 401, count: arrived - 1) + [200])
        #expect(transactions.allSatisfy { $0.request.path == "/\(name)" || $0.request.path == "/digest/\(name)" })
    }

    @Test func anAnswerFromTheCacheIsARecordWithoutANetworkLoad() async throws {
        let api = try await httpbinManager()
        let first = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(first.metrics.transactions.map(\.source) == [.network])
        let second = try await api.request(.get, "cache/60", serializer: DataResponseSerializer())
        #expect(second.metrics.transactions.map(\.source) == [.cache])
        #expect(second.metrics.transactions.first?.response?.status.code == 200)
        #expect(second.metrics.transactions.first?.request.path == "/cache/60")
    }
}
