import Courier
import Foundation
import Testing

/// What a careless caller or a hostile server can hand Courier through its API: cookies for a
/// public suffix, header text in a multipart part, numbers JSON cannot carry, a `Host` meant for
/// one origin, file names that display as something else, and a manager released early.
@Suite struct CarelessInputTests {
    // MARK: Cookies set through the API

    /// `CookieStore.set(setCookieHeader:for:)` applies the public suffix list, as libcurl does
    /// to the same headers in responses: no cookie for `co.uk`, `com`, or part of an address.
    @Test(arguments: [
        ("a=1; Domain=co.uk", "https://www.example.co.uk/"),
        ("a=1; Domain=.co.uk", "https://www.example.co.uk/"),
        ("a=1; Domain=com", "https://example.com/"),
        ("a=1; Domain=github.io", "https://someone.github.io/"),
        ("a=1; Domain=0.0.1", "http://127.0.0.1/"),
        ("a=1; Domain=0.1", "http://10.0.0.1/"),
    ])
    func aSetCookieHeaderForAPublicSuffixIsRefused(header: String, url: String) async throws {
        let api = try await httpbinManager()
        let stored = await api.cookies.set(setCookieHeader: header, for: try #require(URL(string: url)))
        #expect(!stored)
        #expect(await api.cookies.all().isEmpty)
    }

    @Test func aSetCookieHeaderForTheSiteOrItsParentIsStored() async throws {
        let api = try await httpbinManager()
        let url = try #require(URL(string: "https://www.example.co.uk/"))
        #expect(await api.cookies.set(setCookieHeader: "a=1; Domain=example.co.uk", for: url))
        #expect(await api.cookies.set(setCookieHeader: "b=2; Domain=www.example.co.uk", for: url))
        #expect(await api.cookies.set(setCookieHeader: "c=3", for: url))
        let stored = await api.cookies.all().map { "\($0.name)@\($0.domain)" }.sorted()
        #expect(stored == ["a@example.co.uk", "b@www.example.co.uk", "c@www.example.co.uk"])
    }

    /// A cookie set for part of 127.0.0.1 would otherwise go to the server at 127.0.0.1.
    @Test func aCookieForPartOfTheServersAddressIsNeverSent() async throws {
        let api = try await httpbinManager()
        let httpbin = try await TestServers.httpbin()
        #expect(!(await api.cookies.set(setCookieHeader: "leak=1; Domain=0.0.1", for: httpbin)))
        #expect(!(await api.cookies.set(Cookie(name: "leak", value: "2", domain: "0.0.1", includesSubdomains: true))))
        let echo: JSON = try await api.GET("cookies")
        #expect(echo["cookies"] == [:])
    }

    /// A hand-built cookie is refused when its domain with subdomains is a public suffix, or a
    /// field holds a control character (a line break would write another line into the jar).
    @Test func aHandBuiltCookieThatCannotBeStoredIsRefused() async throws {
        let api = try await httpbinManager()
        #expect(!(await api.cookies.set(Cookie(name: "a", value: "1", domain: "co.uk", includesSubdomains: true))))
        #expect(!(await api.cookies.set(Cookie(name: "a", value: "1\nexample.com\tTRUE", domain: "example.com"))))
        #expect(!(await api.cookies.set(Cookie(name: "a\tb", value: "1", domain: "example.com"))))
        #expect(await api.cookies.all().isEmpty)
        #expect(await api.cookies.set(Cookie(name: "a", value: "1", domain: "example.co.uk", includesSubdomains: true)))
        #expect(await api.cookies.all().count == 1)
    }

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

    // MARK: Suggested file names

    /// `invoice\u{202E}fdp.exe` displays as `invoiceexe.pdf`: format characters (bidirectional
    /// overrides, zero-width ones) are stripped from a suggested name, as control characters are.
    @Test func aSuggestedNameLosesBidirectionalOverridesAndFormatCharacters() async throws {
        let api = try await httpbinManager()
        let directory = try DownloadTests.temporaryDirectory()
        let header = "attachment; filename*=UTF-8''invoice%E2%80%AEfdp%E2%80%8B.exe"
        let task = api.downloadTask(
            "response-headers", parameters: ["Content-Disposition": .string(header)], into: directory)
        let file = try await task.value
        #expect(file.lastPathComponent == "invoicefdp.exe")
        #expect(try DownloadTests.contents(directory) == ["invoicefdp.exe"])
    }

    /// A `/` with a combining mark after it is still a directory separator, and dots after
    /// leading spaces are still leading dots.
    @Test(arguments: [
        ("a%2F%CC%81..%2F%CC%81escape.txt", "\u{301}escape.txt"),
        ("%20..", nil),
        ("%20.hidden", "hidden"),
    ])
    func aSuggestedNameStaysOneVisibleComponent(encoded: String, expected: String?) async throws {
        let api = try await httpbinManager()
        let directory = try DownloadTests.temporaryDirectory()
        let header = "attachment; filename*=UTF-8''\(encoded)"
        let task = api.downloadTask(
            "response-headers", parameters: ["Content-Disposition": .string(header)], into: directory)
        let file = try await task.value
        #expect(file.deletingLastPathComponent().standardizedFileURL.path == directory.standardizedFileURL.path)
        if let expected {
            #expect(file.lastPathComponent == expected)
        } else {
            #expect(file.lastPathComponent == "response-headers")
        }
    }

    // MARK: A manager released while it works

    /// Each request holds its manager: released mid-request, the manager lets the request
    /// finish, then goes (its thread ends). `invalidateAndCancel()` is the way to stop early.
    @Test func aReleasedManagerFinishesItsRequestsAndThenGoes() async throws {
        let httpbin = try await TestServers.httpbin()
        weak var released: HTTPSessionManager?
        let task: DataTask<JSON> = {
            let api = HTTPSessionManager(baseURL: httpbin, configuration: .ephemeral)
            released = api
            return api.dataTask(.get, "delay/1", parameters: ["after": "release"])
        }()
        let echo = try await task.value
        #expect(echo["args"]["after"] == "release")
        for _ in 0..<200 where released != nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(released == nil)
    }
}
