import Courier
@_spi(CourierInternals) import CourierCore
import CourierTesting
import Foundation
import HTTPTypes
import Testing

/// Authentication challenges on the stub: a `401` with `WWW-Authenticate` (or a proxy's `407`
/// with `Proxy-Authenticate`) answered by the challenge handler, a subclass, the credential
/// store or the request's own credential; a wrong credential tried once, not in a loop. The
/// stub sends a credential as Basic, so the recorded `Authorization` says which one went.
@Suite struct ChallengeTests {
    /// Answers `path` with `{"user": ...}` when the request carries `ada:lovelace`, and with a
    /// Basic challenge for `realm` otherwise.
    static func protect(_ stub: StubTransport, _ path: String, realm: String = "stub") {
        stub.stub(where: { $0.path == "/v1/" + path }) { request in
            request.request.headerFields[.authorization] == basicAuthorization("ada", "lovelace")
                ? .json(#"{"user": "ada"}"#)
                : .status(.unauthorized, headerFields: [.wwwAuthenticate: #"Basic realm="\#(realm)", charset="UTF-8""#])
        }
    }

    /// The challenges a handler was asked about.
    final class ChallengeLog: Sendable {
        let challenges = Locked<[AuthenticationChallenge]>([])
        var count: Int { challenges.withLock { $0.count } }
        var first: AuthenticationChallenge? { challenges.withLock { $0.first } }

        /// A handler that records the challenge and answers `credential`.
        func handler(answering credential: Credential?) -> @Sendable (AuthenticationChallenge) async -> Credential? {
            { challenge in
                self.challenges.withLock { $0.append(challenge) }
                return credential
            }
        }
    }

    static let ada = Credential(user: "ada", password: "lovelace")

    /// The `Authorization` of each request the stub saw.
    static func authorizations(_ stub: StubTransport) -> [String?] {
        stub.requests.map { $0.request.headerFields[.authorization] }
    }

    @Test func theHandlersCredentialAnswersTheChallengeAndIsKeptForTheSession() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: Self.ada)
        let me: JSON = try await api.GET("me")
        #expect(me["user"] == "ada")
        #expect(Self.authorizations(stub) == [nil, basicAuthorization("ada", "lovelace")])
        let challenge = try #require(log.first)
        #expect(
            challenge.protectionSpace
                == ProtectionSpace(scheme: "https", host: "api.example.com", port: 443, realm: "stub"))
        #expect(challenge.schemes == ["Basic"])
        #expect(challenge.response.status == .unauthorized)
        #expect(challenge.url.absoluteString == "https://api.example.com/v1/me")
        // Kept for the session: the next request carries it from the start, nobody is asked.
        let again: JSON = try await api.GET("me")
        #expect(again["user"] == "ada")
        #expect(log.count == 1)
        #expect(stub.requests.count == 3)
        #expect(stub.requests.last?.request.headerFields[.authorization] == basicAuthorization("ada", "lovelace"))
        #expect(api.credentials.spaces.map(\.realm) == ["stub"])
    }

    @Test func aWrongCredentialIsTriedOnceNotInALoop() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: Credential(user: "ada", password: "wrong"))
        let error = await capturedError { let _: JSON = try await api.GET("me") }
        #expect(isCourierError(error) { if case .unacceptableStatusCode = $0 { true } else { false } })
        #expect(statusCode(of: error) == 401)
        #expect(Self.authorizations(stub) == [nil, basicAuthorization("ada", "wrong")])
        #expect(log.count == 1)
        // The wrong credential was kept: the next request sends it, gets its 401, and stops.
        let second = await capturedError { let _: JSON = try await api.GET("me") }
        #expect(statusCode(of: second) == 401)
        #expect(stub.requests.count == 3)
        #expect(log.count == 1)
    }

    @Test func withoutAnAnswerThe401IsTheResponse() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: nil)
        let response = try await api.request(
            .get, "me", serializer: DataResponseSerializer(acceptableStatusCodes: [401]))
        #expect(response.status == .unauthorized)
        #expect(response.response.headerFields[.wwwAuthenticate]?.hasPrefix("Basic realm=\"stub\"") == true)
        #expect(stub.requests.count == 1)
        #expect(log.count == 1)
        #expect(api.credentials.spaces.isEmpty)
    }

    @Test func aCredentialForOneRequestOnlyIsAskedForEachTime() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: Credential(user: "ada", password: "lovelace", persistence: .none))
        for _ in 0..<2 {
            let me: JSON = try await api.GET("me")
            #expect(me["user"] == "ada")
        }
        #expect(log.count == 2)
        #expect(stub.requests.count == 4)
        #expect(api.credentials.spaces.isEmpty)
    }

    @Test func aStoredCredentialForTheRealmAnswersWithoutTheHandler() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: nil)
        api.credentials.set(Self.ada, for: ProtectionSpace(scheme: "https", host: "api.example.com", port: 443))
        let me: JSON = try await api.GET("me")
        #expect(me["user"] == "ada")
        #expect(log.count == 0)
        #expect(Self.authorizations(stub) == [basicAuthorization("ada", "lovelace")])
    }

    /// An API client that answers challenges itself.
    final class LoginAPI: HTTPSessionManager {
        var asked: [String?] = []

        override func credential(for challenge: AuthenticationChallenge) async -> Credential? {
            asked.append(challenge.protectionSpace.realm)
            return Credential(user: "ada", password: "lovelace")
        }
    }

    @Test func aSubclassAnswersChallenges() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me", realm: "login")
        var configuration = HTTPSessionConfiguration.ephemeral
        configuration.transport = stub.transport
        let api = LoginAPI(baseURL: stubBaseURL, configuration: configuration)
        let me: JSON = try await api.GET("me")
        #expect(me["user"] == "ada")
        #expect(await api.asked == ["login"])
        #expect(stub.requests.count == 2)
    }

    @Test func theRequestsOwnCredentialGoesToItsOriginOnly() async throws {
        let stub = StubTransport()
        Self.protect(stub, "me")
        stub.stub(.get, "elsewhere", with: .redirect(to: "https://other.example.com/landing"))
        stub.stub(.get, "/landing", with: .json("{}"))
        let api = stubbedManager(stub)
        let options = RequestOptions(credential: Self.ada)
        let me = try await api.request(.get, "me", options: options, serializer: JSONResponseSerializer())
        #expect(me.value["user"] == "ada")
        _ = try await api.request(.get, "elsewhere", options: options, serializer: JSONResponseSerializer())
        #expect(
            Self.authorizations(stub) == [
                basicAuthorization("ada", "lovelace"), basicAuthorization("ada", "lovelace"), nil,
            ])
        #expect(stub.requests.last?.url.host == "other.example.com")
        // A request without it has none, and the session kept none.
        let error = await capturedError { let _: JSON = try await api.GET("me") }
        #expect(statusCode(of: error) == 401)
        #expect(api.credentials.spaces.isEmpty)
    }

    @Test func aProxyChallengeIsAnsweredForTheProxyOnly() async throws {
        let stub = StubTransport()
        let proxyAuthorization = basicAuthorization("courier", "proxy-secret")
        stub.stub(where: { $0.path == "/v1/through" }) { request in
            request.request.headerFields[.proxyAuthorization] == proxyAuthorization
                ? .json(#"{"proxied": true}"#)
                : .status(.proxyAuthenticationRequired, headerFields: [.proxyAuthenticate: #"Basic realm="gate""#])
        }
        let api = stubbedManager(stub) { $0.proxy = URL(string: "http://proxy.example.com:3128") }
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: Credential(user: "courier", password: "proxy-secret"))
        for _ in 0..<2 {
            let reply: JSON = try await api.GET("through")
            #expect(reply["proxied"] == true)
        }
        let space = try #require(log.first?.protectionSpace)
        #expect(
            space
                == ProtectionSpace(scheme: "http", host: "proxy.example.com", port: 3128, realm: "gate", isProxy: true))
        #expect(log.first?.response.status.code == 407)
        #expect(log.count == 1)
        // The second request had the stored proxy credential from the start; the server was
        // never sent it.
        #expect(
            stub.requests.map { $0.request.headerFields[.proxyAuthorization] } == [
                nil, proxyAuthorization, proxyAuthorization,
            ])
        #expect(Self.authorizations(stub) == [nil, nil, nil])
    }

    @Test func aStreamedBodyIsNotSentAgainForAChallenge() async throws {
        let stub = StubTransport()
        stub.stub(
            .put, "upload", with: .status(.unauthorized, headerFields: [.wwwAuthenticate: #"Basic realm="stub""#]))
        let api = stubbedManager(stub)
        let log = ChallengeLog()
        api.challengeHandler = log.handler(answering: Self.ada)
        let error = await capturedError {
            _ = try await api.uploadTask(
                .put, "upload", body: .stream([Data("abc".utf8)].async), serializer: DataResponseSerializer()
            ).value
        }
        #expect(statusCode(of: error) == 401)
        #expect(stub.requests.count == 1)
        #expect(log.count == 0)
    }
}
