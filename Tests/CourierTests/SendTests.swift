import Courier
import Foundation
import HTTPTypes
import Testing

/// Requests built by the caller (`HTTPRequest`, `Request<Response>`) go through the same
/// pipeline as the verbs: session headers, interceptors, the cache, validation.
@Suite struct SendTests {
    private struct Echo: Decodable, Sendable {
        var args: [String: String]
        var headers: [String: String]
        var json: [String: String]?
    }

    /// Adds a header to every attempt.
    private struct Stamp: RequestInterceptor {
        func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
            var request = request
            request.headerFields[HTTPField.Name("X-Stamp")!] = "stamped"
            return request
        }
    }

    @Test func anHTTPRequestGoesThroughTheSessionsPipeline() async throws {
        let base = try await TestServers.httpbin()
        let api = try await httpbinManager {
            $0.additionalHeaders = ["X-Session": "yes", "X-Replaced": "session"]
            $0.interceptors = [Stamp()]
        }
        var request = HTTPRequest(
            method: .put, scheme: base.scheme, authority: "\(base.host!):\(base.port!)", path: "/put?from=send")
        request.headerFields[.contentType] = "application/json"
        request.headerFields[HTTPField.Name("X-Replaced")!] = "request"
        let response = try await api.send(request, body: .data(Data(#"{"name":"Ada"}"#.utf8)))
        let echo = try JSONDecoder().decode(Echo.self, from: response.data)
        #expect(echo.args == ["from": "send"])
        #expect(echo.json == ["name": "Ada"])
        #expect(echo.headers["X-Session"] == "yes")
        #expect(echo.headers["X-Replaced"] == "request")
        #expect(echo.headers["X-Stamp"] == "stamped")
        #expect(echo.headers["Content-Type"] == "application/json")
    }

    @Test func aRequestWithOnlyAPathIsResolvedAgainstTheBaseURL() async throws {
        let api = try await httpbinManager()
        let response = try await api.send(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "anything/relative?q=1"),
            serializer: JSONResponseSerializer())
        #expect(response.value["args"]["q"] == "1")
        #expect(response.value["url"].stringValue?.hasSuffix("/anything/relative?q=1") == true)
    }

    @Test func theCacheAndValidationApplyAsForEveryCall() async throws {
        let api = try await httpbinManager()
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "cache/60")
        #expect(try await api.send(request).source == .network)
        #expect(try await api.send(request).source == .cache)
        let error = await capturedError {
            _ = try await api.send(HTTPRequest(method: .get, scheme: nil, authority: nil, path: "status/418"))
        }
        #expect(isCourierError(error) { $0.response?.status.code == 418 })
    }

    @Test func aTaskFormReportsAndReturnsTheSame() async throws {
        let api = try await httpbinManager()
        let task = api.sendTask(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "bytes/2048"),
            serializer: DataResponseSerializer())
        #expect(try await task.value.count == 2048)
    }

    @Test func aTypedRequestEncodesItsQueryAndBodyAndDecodesItsResponse() async throws {
        let api = try await httpbinManager()
        let request = Request<Echo>(
            .post, "post", query: [("name", "Ada Lovelace"), ("flag", nil)], headers: ["X-Typed": "1"],
            body: ["language": "Swift"])
        let echo = try await api.send(request)
        #expect(echo.args == ["name": "Ada Lovelace", "flag": ""])
        #expect(echo.json == ["language": "Swift"])
        #expect(echo.headers["Content-Type"] == "application/json")
        #expect(echo.headers["X-Typed"] == "1")
        // The same request, its body ignored.
        let empty = try await api.response(for: request.expecting(Empty.self))
        #expect(empty.status == .ok)
    }
}

/// Credentials written into the URL: Basic up front, and the challenge answered when the
/// server asks for another scheme.
@Suite struct URLCredentialTests {
    @Test func aDigestOnlyServerIsReachedWithTheURLsCredential() async throws {
        let base = try await TestServers.httpbin()
        let api = try await httpbinManager()
        let url = "http://ada:secret@\(base.host!):\(base.port!)/digest-auth/auth/ada/secret"
        let answer: JSON = try await api.GET(url)
        #expect(answer["authenticated"] == true)
        #expect(answer["user"] == "ada")
    }

    @Test func aBasicServerGetsTheCredentialWithTheFirstRequestAndAWrongOneFails() async throws {
        let base = try await TestServers.httpbin()
        let api = try await httpbinManager()
        let answer: JSON = try await api.GET("http://ada:secret@\(base.host!):\(base.port!)/basic-auth/ada/secret")
        #expect(answer["authenticated"] == true)
        let error = await capturedError {
            let _: JSON = try await api.GET("http://ada:wrong@\(base.host!):\(base.port!)/basic-auth/ada/secret")
        }
        #expect(isCourierError(error) { $0.response?.status.code == 401 })
    }
}
