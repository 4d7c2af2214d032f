import Courier
import Foundation
import HTTPTypes
import Testing

/// Bad input fails with a clear error before anything is sent. The fault server counts what
/// reaches it, so these tests prove nothing went out.
@Suite struct BadInputTests {
    @Test(arguments: ["file:///etc/passwd", "ftp://127.0.0.1/", "gopher://127.0.0.1/", "dict://127.0.0.1/"])
    func nonHTTPSchemesAreRefused(url: String) async throws {
        let api = HTTPSessionManager(configuration: .ephemeral)
        let error = await capturedError { _ = try await api.GET(url) }
        guard case CourierError.unsupportedScheme(let context)? = error else {
            Issue.record("expected unsupportedScheme, got \(String(describing: error))")
            return
        }
        #expect(context.message.contains("http"))
    }

    @Test(arguments: ["http://exa mple.com/", "http://", "relative/without/base", "http://[::1/"])
    func malformedURLsAreRefused(url: String) async throws {
        let api = HTTPSessionManager(configuration: .ephemeral)
        let error = await capturedError { _ = try await api.GET(url) }
        #expect(isCourierError(error!) { if case .invalidURL = $0 { true } else { false } })
    }

    @Test(arguments: [
        ["X-Injected": "a\r\nEvil: yes"], ["X-Injected": "line\nfeed"], ["Bad\r\nName": "v"], ["Bad Name": "v"],
        ["": "empty"], ["X-Nul": "a\u{0}b"],
    ])
    func headersWithCRLFOrInvalidNamesAreRefused(headers: [String: String]) async throws {
        let api = try await faultManager()
        let name = "bad-header-\(UInt32.random(in: 0...UInt32.max))"
        let error = await capturedError { _ = try await api.GET("file/\(name)", headers: headers) }
        #expect(isCourierError(error!) { if case .invalidHeader = $0 { true } else { false } })
        let stats: JSON = try await api.GET("stats/\(name)")
        #expect(stats["requests"] == 0)
    }

    @Test func invalidSessionHeadersAreRefusedToo() async throws {
        let api = try await faultManager()
        api.additionalHeaders = ["X-Session": "a\rb"]
        let error = await capturedError { _ = try await api.GET("status/200") }
        #expect(isCourierError(error!) { if case .invalidHeader = $0 { true } else { false } })
    }

    @Test func nonObjectFormParametersAreRefused() async throws {
        let api = try await faultManager()
        let error = await capturedError { _ = try await api.POST("echo", parameters: [1, 2, 3]) }
        #expect(isCourierError(error!) { if case .serializationFailed = $0 { true } else { false } })
    }

    @Test func anAdaptedRequestWithAnotherSchemeIsRefused() async throws {
        final class SchemeChanger: HTTPSessionManager {
            override func adapt(_ request: HTTPRequest) async throws -> HTTPRequest {
                var request = request
                request.scheme = "ftp"
                return request
            }
        }
        let api = SchemeChanger(baseURL: try await TestServers.fault(), configuration: .ephemeral)
        let error = await capturedError { _ = try await api.GET("status/200") }
        #expect(isCourierError(error!) { if case .unsupportedScheme = $0 { true } else { false } })
    }

    @Test func errorsReadWellWhenPrinted() async throws {
        let api = HTTPSessionManager(configuration: .ephemeral)
        let error = await capturedError { _ = try await api.GET("ftp://example.com/file") }
        let text = "\(error!)"
        #expect(text.hasPrefix("CourierError.unsupportedScheme: "))
        #expect(text.contains("ftp://example.com/file"))
    }
}
