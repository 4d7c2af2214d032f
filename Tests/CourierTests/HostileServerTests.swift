import Courier
import Foundation
import Testing

/// Servers that misbehave on purpose: credentials asked for across a redirect, bytes on an idle
/// connection, redirects whose bodies never end; and settings far out of range.
@Suite struct HostileServerTests {
    /// Records what a challenge handler was asked. `@unchecked Sendable`: guarded by `lock`.
    final class Asked: @unchecked Sendable {
        private let lock = NSLock()
        private var spaces: [ProtectionSpace] = []

        func record(_ space: ProtectionSpace) { lock.withLock { spaces.append(space) } }
        var all: [ProtectionSpace] { lock.withLock { spaces } }
    }

    /// The `Authorization` values the fault server saw under `name` (null for none).
    static func authorizations(_ api: HTTPSessionManager, _ name: String) async throws -> [JSON] {
        let stats: JSON = try await api.GET("stats/\(name)")
        return stats["authorizations"].arrayValue ?? []
    }

    /// The fault server under two origins (127.0.0.1 and localhost, same port), and a manager
    /// on the first.
    static func twoOrigins() async throws -> (HTTPSessionManager, first: URL, second: URL) {
        let fault = try await TestServers.fault()
        let port = try #require(fault.port)
        let second = try #require(URL(string: "http://localhost:\(port)/"))
        return (try await faultManager(), fault, second)
    }

    @Test(arguments: [false, true])
    func aCredentialForARedirectTargetGoesToThatTargetOnly(preemptive: Bool) async throws {
        let (api, first, second) = try await Self.twoOrigins()
        let name = "auth-\(preemptive)-\(UUID().uuidString.prefix(8))"
        let target = second.appendingPathComponent("auth-required/\(name)-b").absoluteString + "?user=ada&password=x"
        let asked = Asked()
        api.challengeHandler = { challenge in
            asked.record(challenge.protectionSpace)
            return Credential(user: "ada", password: "x", persistence: .none, sendsPreemptively: preemptive)
        }
        let reply: JSON = try await api.GET("auth-redirect/\(name)-a", parameters: ["to": .string(target)])
        #expect(reply["authenticated"] == true)
        // The handler was asked for the redirect target's protection space, once.
        #expect(asked.all.count == 1)
        #expect(asked.all.first?.host == "localhost")
        #expect(asked.all.first?.port == second.port)
        #expect(asked.all.first?.realm == "fault")
        // The first origin never saw the credential, on the first try or the retry.
        let firstSaw = try await Self.authorizations(api, "\(name)-a")
        #expect(firstSaw == [.null, .null])
        let secondSaw = try await Self.authorizations(api, "\(name)-b")
        #expect(secondSaw.first == .null)
        #expect(secondSaw.last == .string("Basic " + Data("ada:x".utf8).base64EncodedString()))
        _ = first
    }

    @Test func aSessionCredentialForTheRedirectTargetIsUsedThereWithoutAskingAgain() async throws {
        let (api, _, second) = try await Self.twoOrigins()
        let name = "stored-\(UUID().uuidString.prefix(8))"
        let space = try #require(ProtectionSpace(url: second))
        api.credentials.set(Credential(user: "ada", password: "y"), for: space)
        let asked = Asked()
        api.challengeHandler = { challenge in
            asked.record(challenge.protectionSpace)
            return nil
        }
        let target = second.appendingPathComponent("auth-required/\(name)-b").absoluteString + "?user=ada&password=y"
        let reply: JSON = try await api.GET("auth-redirect/\(name)-a", parameters: ["to": .string(target)])
        #expect(reply["authenticated"] == true)
        #expect(asked.all.isEmpty)
        #expect(try await Self.authorizations(api, "\(name)-a") == [.null, .null])
    }

    @Test func bytesSentOnAnIdleConnectionNeverAnswerTheNextRequest() async throws {
        // One connection, so the second request would reuse the first's.
        let api = try await faultManager { $0.maximumConnectionsPerHost = 1 }
        for _ in 0..<3 {
            let first = try await api.GET(
                "idle-junk", parameters: ["delay": 50], serializer: StringResponseSerializer())
            #expect(first == "first")
            // The unasked response arrives while the connection is idle.
            try await Task.sleep(for: .milliseconds(400))
            let second = try await api.GET("bytes", parameters: ["n": 8], serializer: DataResponseSerializer())
            #expect(second == faultBytes(8))
        }
    }

    @Test(arguments: [false, true])
    func aRedirectWhoseBodyNeverEndsIsFollowed(declaresLength: Bool) async throws {
        // Without the cut the transfer reads forever, so the resource timeout bounds the test.
        let api = try await faultManager { $0.resourceTimeout = .seconds(20) }
        let fault = try await TestServers.fault()
        let target = fault.appendingPathComponent("bytes").absoluteString + "?n=100"
        var parameters: JSON = ["to": .string(target)]
        if declaresLength { parameters["length"] = 1 }
        let response = try await api.request(
            .get, "redirect-endless", parameters: parameters, serializer: DataResponseSerializer())
        #expect(response.value == faultBytes(100))
        #expect(response.metrics.redirectCount == 1)
    }

    @Test func aRedirectWithAShortBodyKeepsItsConnection() async throws {
        let api = try await faultManager { $0.maximumConnectionsPerHost = 1 }
        let fault = try await TestServers.fault()
        _ = try await api.GET("bytes", parameters: ["n": 1], serializer: DataResponseSerializer())
        let response = try await api.request(
            .get, "redirect", parameters: ["to": .string(fault.appendingPathComponent("bytes").absoluteString)],
            serializer: DataResponseSerializer())
        #expect(response.value == faultBytes(1024))
        #expect(response.metrics.reusedConnection == true)
    }

    @Test func aCallsConnectTimeoutEndsAHandshakeNobodyAnswers() async throws {
        // A socket that listens and never accepts: the kernel completes the TCP handshake, and
        // the TLS handshake that follows gets no answer.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 && listen(listener, 8) == 0
            }
        }
        try #require(listening)
        let port = Int(UInt16(bigEndian: address.sin_port))
        // The session would wait 30 s to connect, and its other timeouts longer; the call, 1 s.
        let api = HTTPSessionManager(configuration: .ephemeral)
        var options = RequestOptions()
        options.connectTimeout = .seconds(1)
        let error = await capturedError {
            _ = try await api.GET("https://127.0.0.1:\(port)/", options: options, serializer: DataResponseSerializer())
        }
        guard case .timedOut = error as? CourierError else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
    }

    @Test func timeoutsFarOutOfRangeAreClampedNotFatal() async throws {
        let durations: [Duration] = [.seconds(Int64.max), .seconds(Int64.min), .zero, .milliseconds(-1)]
        for duration in durations {
            let api = try await faultManager {
                $0.requestTimeout = duration
                $0.resourceTimeout = duration
                $0.connectTimeout = duration
                $0.connectionIdleTimeout = duration
            }
            // A huge limit is no limit; zero and negative ones are the shortest there are (on
            // loopback, short enough to time out, or not).
            do {
                let data = try await api.GET("bytes", parameters: ["n": 10], serializer: DataResponseSerializer())
                #expect(data == faultBytes(10), "\(duration)")
            } catch CourierError.timedOut {
                #expect(duration <= .zero, "\(duration)")
            }
        }
    }

    @Test func connectionLimitsFarOutOfRangeAreClampedNotFatal() async throws {
        for limit in [Int.max, Int.min, 0] {
            let api = try await faultManager {
                $0.maximumConnectionsPerHost = limit
                $0.maximumConnections = limit
                $0.maximumConcurrentTasks = limit
                $0.maximumRedirects = limit
                $0.maximumBytesPerSecond = limit == 0 ? nil : Int64(limit)
                $0.maximumResponseSize = Int64(limit)
            }
            do {
                let data = try await api.GET("bytes", parameters: ["n": 10], serializer: DataResponseSerializer())
                #expect(data == faultBytes(10))
            } catch CourierError.responseTooLarge {
                #expect(limit <= 0)  // a limit of zero or less admits no body
            }
        }
    }

    // MARK: Credentials after an interceptor's rewrite

    /// An interceptor that sends every attempt to `authority` instead.
    static func rewriting(to authority: String) -> Interceptor {
        Interceptor(adapt: { request, _ in
            var request = request
            request.authority = authority
            return request
        })
    }

    @Test func credentialsInTheURLDoNotFollowARewriteToAnotherOrigin() async throws {
        let (api, first, second) = try await Self.twoOrigins()
        let name = "url-rewrite-\(UUID().uuidString.prefix(8))"
        let path = "auth-required/\(name)?user=ada&password=secret"
        let withUser = try #require(URL(string: "http://ada:secret@\(first.host!):\(first.port!)/\(path)"))
        // To its own origin the URL's credential goes, with the first request.
        let reply: JSON = try await api.GET(withUser.absoluteString)
        #expect(reply["authenticated"] == true)
        // Sent elsewhere by an interceptor, the request carries none of it.
        let elsewhere = RequestOptions(interceptors: [Self.rewriting(to: "\(second.host!):\(second.port!)")])
        let error = await capturedError {
            _ = try await api.request(
                .get, withUser.absoluteString, options: elsewhere, serializer: JSONResponseSerializer())
        }
        #expect(isCourierError(error) { $0.response?.status.code == 401 })
        // The same for the call's own credential.
        var own = elsewhere
        own.credential = Credential(user: "ada", password: "secret", persistence: .none, sendsPreemptively: true)
        let ownError = await capturedError {
            _ = try await api.request(.get, path, options: own, serializer: JSONResponseSerializer())
        }
        #expect(isCourierError(ownError) { $0.response?.status.code == 401 })
        let basic = JSON.string("Basic " + Data("ada:secret".utf8).base64EncodedString())
        #expect(try await Self.authorizations(api, name) == [basic, .null, .null])
        // A rewrite that keeps the origin keeps the credential.
        let same = RequestOptions(interceptors: [Self.rewriting(to: "\(first.host!):\(first.port!)")])
        let kept = try await api.request(
            .get, withUser.absoluteString, options: same, serializer: JSONResponseSerializer())
        #expect(kept.value["authenticated"] == true)
    }
}
