import Courier
import Foundation
import HTTPTypes
import Testing

/// Redirects: 301, 302 and 303 become GET; 307 and 308 keep method and body; loops end.
@Suite struct RedirectTests {
    @Test func relativeAndAbsoluteRedirectsAreFollowed() async throws {
        let api = try await httpbinManager()
        let relative = try await api.request(.get, "relative-redirect/3", serializer: JSONResponseSerializer())
        #expect(relative.url.path == "/get")
        #expect(relative.metrics.redirectCount == 3)
        let absolute = try await api.request(.get, "absolute-redirect/2", serializer: JSONResponseSerializer())
        #expect(absolute.url.path == "/get")
        #expect(absolute.metrics.redirectCount == 2)
    }

    @Test(arguments: [301, 302, 303])
    func postBecomesGETWithoutBody(status: Int) async throws {
        let api = try await httpbinManager()
        let echo = try await api.request(
            .post, "redirect-to?url=%2Fanything%2Fafter&status_code=\(status)", body: Data("payload".utf8),
            headers: ["Content-Type": "text/plain", "Authorization": "Bearer same-origin"],
            serializer: JSONResponseSerializer()
        ).value
        #expect(echo["method"] == "GET")
        #expect(echo["data"] == "")
        #expect(echo["headers"]["Content-Type"] == nil)
        #expect(echo["headers"]["Authorization"] == "Bearer same-origin")
    }

    @Test(arguments: [HTTPRequest.Method.put, .patch, .delete])
    func otherMethodsBecomeGETOn303(method: HTTPRequest.Method) async throws {
        let fault = try await TestServers.fault()
        let api = try await httpbinManager()
        let target = try await TestServers.httpbin().appendingPathComponent("anything/after").absoluteString
        let echo = try await api.request(
            method, fault.absoluteString + "redirect?status=303&to=" + QueryStringEncoding.escape(target),
            body: Data("payload".utf8), serializer: JSONResponseSerializer()
        ).value
        #expect(echo["method"] == "GET")
        #expect(echo["data"] == "")
    }

    @Test(arguments: [307, 308])
    func methodAndBodySurvive307And308(status: Int) async throws {
        let api = try await httpbinManager()
        let body = Data(#"{"kept":true}"#.utf8)
        let echo = try await api.request(
            .put,
            "redirect-to?url=%2Fanything%2Fafter&status_code=\(status)", body: body,
            headers: ["Content-Type": "application/json"], serializer: JSONResponseSerializer()
        ).value
        #expect(echo["method"] == "PUT")
        #expect(echo["json"] == ["kept": true])
        #expect(echo["headers"]["Content-Type"] == "application/json")
    }

    @Test func aRedirectLoopEndsInTooManyRedirects() async throws {
        let api = try await faultManager { $0.maximumRedirects = 5 }
        let error = await capturedError { _ = try await api.GET("redirect-loop") }
        guard case CourierError.tooManyRedirects(let context)? = error else {
            Issue.record("expected tooManyRedirects, got \(String(describing: error))")
            return
        }
        #expect(context.response?.status.code == 302)
        #expect(context.url?.path == "/redirect-loop/5")
    }

    @Test func redirectsToOtherSchemesAreRefused() async throws {
        let api = try await faultManager()
        let error = await capturedError {
            _ = try await api.GET("redirect", parameters: ["status": 302, "to": "ftp://127.0.0.1/file"])
        }
        guard case CourierError.unsupportedScheme(let context)? = error else {
            Issue.record("expected unsupportedScheme, got \(String(describing: error))")
            return
        }
        #expect(context.url?.scheme == "ftp")
    }

    @Test func credentialsAreDroppedOnARedirectToAnotherOrigin() async throws {
        let api = try await faultManager()
        // 127.0.0.1 and localhost are different origins for the same httpbin.
        let httpbin = try await TestServers.httpbin()
        let target = "http://localhost:\(httpbin.port!)/anything/elsewhere"
        let echo: JSON = try await api.GET(
            "redirect", parameters: ["status": 302, "to": .string(target)],
            headers: ["Authorization": "Bearer secret", "Cookie": "session=1", "X-Other": "kept"])
        #expect(echo["headers"]["Authorization"] == nil)
        #expect(echo["headers"]["Cookie"] == nil)
        #expect(echo["headers"]["X-Other"] == "kept")
        #expect(echo["url"].stringValue?.hasPrefix("http://localhost:") == true)
    }

    @Test func redirectsCanBeTurnedOff() async throws {
        let api = try await httpbinManager { $0.followsRedirects = false }
        let response = try await api.request(
            .get, "redirect/1", serializer: DataResponseSerializer(acceptableStatusCodes: [302]))
        #expect(response.status.code == 302)
        #expect(response.headerFields[.location] == "/get")
    }
}

extension RedirectTests {
    // MARK: A Host header across origins

    /// A caller's `Host` names the first origin: sent to another, it would ask that server for
    /// the first one's site. It is dropped there, as curl drops it.
    @Test func aCustomHostHeaderDoesNotFollowARedirectToAnotherOrigin() async throws {
        let api = try await faultManager()
        let fault = try await TestServers.fault()
        let httpbin = try await TestServers.httpbin()
        let port = try #require(httpbin.port)
        let target = "http://localhost:\(port)/headers"
        let echo: JSON = try await api.GET(
            "redirect", parameters: ["status": 302, "to": .string(target)],
            headers: ["Host": "127.0.0.1:\(try #require(fault.port))"])
        #expect(echo["headers"]["Host"] == .string("localhost:\(port)"))
    }

    @Test func aCustomHostHeaderStaysOnTheSameOrigin() async throws {
        let api = try await httpbinManager()
        let httpbin = try await TestServers.httpbin()
        let host = "127.0.0.1:\(try #require(httpbin.port))"
        let echo: JSON = try await api.GET("redirect-to", parameters: ["url": "/headers"], headers: ["Host": host])
        #expect(echo["headers"]["Host"] == .string(host))
    }
}
