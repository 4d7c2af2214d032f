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

extension BadInputTests {
    // MARK: Multipart part headers

    /// A MIME type or an extra part header with CR or LF would start headers (or a part) of its
    /// own: the request fails with `invalidHeader` before anything is sent.
    @Test(arguments: [
        ("text/plain\r\nContent-Disposition: form-data; name=\"admin\"", [String: String]()),
        ("text/plain", ["X-Note": "one\r\n\r\n--boundary"]),
        ("text/plain", ["Bad Name": "value"]),
    ])
    func aPartHeaderThatBreaksTheLineIsRefused(mimeType: String, headers: [String: String]) async throws {
        let api = try await httpbinManager()
        let error = await capturedError {
            let _: JSON = try await api.POST("post") { form in
                form.append(Data("hello".utf8), name: "file", fileName: "a.txt", mimeType: mimeType, headers: headers)
            }
        }
        #expect(isCourierError(error) { if case .invalidHeader = $0 { true } else { false } })
        let upload = api.uploadTask(
            .post, "post",
            body: .multipart(
                {
                    var form = MultipartFormData()
                    form.append(
                        Data("hello".utf8), name: "file", fileName: "a.txt", mimeType: mimeType, headers: headers)
                    return form
                }()), serializer: JSONResponseSerializer())
        let uploadError = await capturedError { _ = try await upload.value }
        #expect(isCourierError(uploadError) { if case .invalidHeader = $0 { true } else { false } })
    }

    /// CR LF in a part's name and file name (which are quoted) and in its MIME type (which is
    /// not) at once: refused with the documented error, and nothing reaches the server.
    @Test func aPartWithLineBreaksInEveryFieldIsAnInvalidHeaderAndNothingIsSent() async throws {
        let api = try await faultManager()
        let name = "multipart-crlf-\(UUID().uuidString.prefix(8))"
        func append(_ form: inout MultipartFormData) {
            form.append(
                Data("x".utf8), name: "field\r\nInjected-Name: 1", fileName: "f\"\r\nInjected-File: 1.txt",
                mimeType: "text/plain\r\nInjected-Type: 1")
        }
        var form = MultipartFormData()
        append(&form)
        let directory = try DownloadTests.temporaryDirectory()
        let errors = [
            await capturedError {
                let _: JSON = try await api.POST("flaky/\(name)", parameters: ["fail": 0]) { append(&$0) }
            },
            await capturedError {
                _ = try await api.uploadTask(.post, "flaky/\(name)", body: .multipart(form)).value
            },
            await capturedError {
                _ = try await api.downloadTask(
                    .post, "flaky/\(name)", body: .multipart(form), to: directory.appendingPathComponent("out")
                ).value
            },
        ]
        for error in errors {
            guard case .invalidHeader(let context)? = error as? CourierError else {
                Issue.record("expected invalidHeader, got \(String(describing: error))")
                continue
            }
            #expect(context.message.contains("MIME type"))
        }
        #expect(try await RetryTests.stats(name)["requests"] == 0)
        #expect(try DownloadTests.contents(directory) == [])
    }

    @Test func wellFormedPartHeadersStillGoOut() async throws {
        let api = try await httpbinManager()
        let reply: JSON = try await api.POST("post") { form in
            form.append(Data("hello".utf8), name: "file", fileName: "a.txt", mimeType: "text/plain; charset=utf-8")
        }
        #expect(reply["files"]["file"] == "hello")
    }
}

extension BadInputTests {
    // MARK: Numbers JSON cannot carry

    /// NaN and infinity were sent as `null` (a silent change of the caller's data); the
    /// `Encodable` path already refused them, and so do JSON parameters now.
    @Test(arguments: [Double.nan, .infinity, -.infinity])
    func aNonFiniteNumberIsASerializationFailure(number: Double) async throws {
        let api = try await httpbinManager()
        api.requestSerializer = JSONRequestSerializer()
        let inBody = await capturedError {
            let _: JSON = try await api.POST("post", parameters: ["reading": ["value": .double(number)]])
        }
        #expect(isCourierError(inBody) { if case .serializationFailed = $0 { true } else { false } })
        #expect(inBody.map { String(describing: $0) }?.contains("reading.value") == true)
        let inQuery = await capturedError {
            let _: JSON = try await api.GET("get", parameters: ["value": .double(number)])
        }
        #expect(isCourierError(inQuery) { if case .serializationFailed = $0 { true } else { false } })
        api.requestSerializer = HTTPRequestSerializer()
        let inForm = await capturedError {
            let _: JSON = try await api.POST("post", parameters: ["values": [.int(1), .double(number)]])
        }
        #expect(isCourierError(inForm) { if case .serializationFailed = $0 { true } else { false } })
    }
}
