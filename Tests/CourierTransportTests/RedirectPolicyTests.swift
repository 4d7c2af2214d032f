@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes
import Testing

/// `RedirectPolicy`, the rules every transport follows a redirect by: the method and body per
/// status, the fields dropped for another origin, the schemes and locations refused, the
/// limit, and the redirect handler's say.
@Suite struct RedirectPolicyTests {
    static let origin = "https://api.example.com"

    /// A transfer request for `method` to `path` on `origin`, with `fields` and `body`.
    static func request(
        _ method: HTTPRequest.Method, _ url: String = origin + "/v1/start", fields: HTTPFields = [:],
        body: RequestBody? = nil, maximumRedirects: Int = 16,
        handler: (@Sendable (RedirectHop) -> HTTPRequest?)? = nil
    ) -> TransferRequest {
        var head = HTTPRequest(method: method, url: URL(string: url)!)
        head.headerFields = fields
        var options = TransferOptions()
        options.maximumRedirects = maximumRedirects
        var request = TransferRequest(head: head, urlString: url, body: body, options: options)
        request.redirectHandler = handler
        return request
    }

    static func next(
        _ request: TransferRequest, _ code: Int, to location: String = origin + "/v1/next", count: Int = 0
    ) throws(CourierError) -> TransferRequest? {
        try RedirectPolicy.nextRequest(
            after: request, response: HTTPResponse(status: .init(code: code), headerFields: [.location: location]),
            location: location, redirectCount: count)
    }

    static let body = RequestBody(.data(Data(#"{"a": 1}"#.utf8)))
    static let bodyFields: HTTPFields = [
        .contentType: "application/json", .contentEncoding: "gzip", .contentLanguage: "en",
        .contentLocation: "/v1/a", HTTPField.Name("X-Trace")!: "t",
    ]

    @Test(arguments: [301, 302, 303])
    func aPOSTBecomesAGETWithoutItsBody(code: Int) throws {
        let next = try #require(try Self.next(Self.request(.post, fields: Self.bodyFields, body: Self.body), code))
        #expect(next.head.method == .get)
        #expect(next.body == nil)
        for name in [HTTPField.Name.contentType, .contentEncoding, .contentLanguage, .contentLocation] {
            #expect(next.head.headerFields[name] == nil, "\(name)")
        }
        #expect(next.head.headerFields[HTTPField.Name("X-Trace")!] == "t")  // the rest stay
        #expect(next.urlString == Self.origin + "/v1/next")
        #expect(next.head.path == "/v1/next")
    }

    @Test(arguments: [301, 302, 303])
    func getAndHEADStayAsTheyAre(code: Int) throws {
        for method in [HTTPRequest.Method.get, .head] {
            let next = try #require(try Self.next(Self.request(method), code))
            #expect(next.head.method == method)
        }
    }

    @Test func a303TurnsEveryOtherMethodIntoAGET() throws {
        for method in [HTTPRequest.Method.put, .patch, .delete, .options] {
            let next = try #require(try Self.next(Self.request(method, body: Self.body), 303))
            #expect(next.head.method == .get, "\(method)")
            #expect(next.body == nil, "\(method)")
        }
    }

    @Test(arguments: [307, 308])
    func temporaryAndPermanentRedirectsRepeatTheRequest(code: Int) throws {
        for method in [HTTPRequest.Method.post, .put, .patch, .delete] {
            let next = try #require(try Self.next(Self.request(method, fields: Self.bodyFields, body: Self.body), code))
            #expect(next.head.method == method)
            if case .data(let data) = next.body?.content {
                #expect(data == Data(#"{"a": 1}"#.utf8))
            } else {
                Issue.record("the body was not kept for a \(code) of \(method)")
            }
            #expect(next.head.headerFields[.contentType] == "application/json")
        }
    }

    @Test func aStreamedBodyCannotBeSentAgain() throws {
        let stream = RequestBody(.stream(StreamBodyBridge(AsyncStream<Data> { $0.finish() })))
        #expect {
            try Self.next(Self.request(.post, body: stream), 307)
        } throws: { error in
            guard case CourierError.serializationFailed(let context) = error else { return false }
            return context.message.contains("cannot be sent again for a 307 redirect")
        }
        // A 303 drops the body, so there is nothing to send again.
        let next = try #require(try Self.next(Self.request(.post, body: stream), 303))
        #expect(next.body == nil)
    }

    static let originFields: HTTPFields = [
        .authorization: "Bearer secret", .cookie: "id=1", .proxyAuthorization: "Basic cA==",
        HTTPField.Name("Host")!: "api.example.com", .accept: "application/json",
    ]

    @Test(arguments: [
        "https://other.example.com/x",  // another host
        "http://api.example.com/x",  // another scheme
        "https://api.example.com:8443/x",  // another port
    ])
    func credentialsStayWithTheirOrigin(location: String) throws {
        let next = try #require(try Self.next(Self.request(.get, fields: Self.originFields), 302, to: location))
        for name in [HTTPField.Name.authorization, .cookie, .proxyAuthorization, HTTPField.Name("Host")!] {
            #expect(next.head.headerFields[name] == nil, "\(name) went to \(location)")
        }
        #expect(next.head.headerFields[.accept] == "application/json")
    }

    @Test(arguments: [
        "https://api.example.com/elsewhere", "https://API.Example.COM/elsewhere",
        "https://api.example.com:443/elsewhere",
    ])
    func theSameOriginKeepsThem(location: String) throws {
        let next = try #require(try Self.next(Self.request(.get, fields: Self.originFields), 302, to: location))
        #expect(next.head.headerFields[.authorization] == "Bearer secret")
        #expect(next.head.headerFields[.cookie] == "id=1")
        // The URL text the transport is given names the host in lower case.
        #expect(next.urlString.hasPrefix("https://api.example.com"))
    }

    @Test func theLimitCountsTheRedirectsAlreadyFollowed() throws {
        let request = Self.request(.get, maximumRedirects: 3)
        #expect(try Self.next(request, 302, count: 2) != nil)
        #expect {
            try Self.next(request, 302, count: 3)
        } throws: { error in
            guard case CourierError.tooManyRedirects(let context) = error else { return false }
            return context.message == "Stopped after 3 redirects" && context.response?.status.code == 302
        }
        #expect {
            try Self.next(Self.request(.get, maximumRedirects: 0), 301)
        } throws: { error in
            if case CourierError.tooManyRedirects = error { true } else { false }
        }
    }

    @Test(arguments: ["ftp://api.example.com/file", "file:///etc/passwd", "javascript:alert(1)"])
    func otherSchemesAreRefused(location: String) {
        #expect {
            try Self.next(Self.request(.get), 302, to: location)
        } throws: { error in
            if case CourierError.unsupportedScheme = error { true } else { false }
        }
    }

    @Test(arguments: ["no scheme", "https://", "http:///path"])
    func locationsThatAreNotURLsAreRefused(location: String) {
        #expect {
            try Self.next(Self.request(.get), 302, to: location)
        } throws: { error in
            if case CourierError.invalidURL = error { true } else { false }
        }
    }

    @Test func theHandlerSeesTheHopAndMayChangeIt() throws {
        let seen = Locked<[RedirectHop]>([])
        let request = Self.request(.post, body: Self.body) { hop in
            seen.withLock { $0.append(hop) }
            var next = hop.proposed
            next.path = "/v1/chosen"
            next.headerFields[HTTPField.Name("X-Chosen")!] = "1"
            return next
        }
        let next = try #require(try Self.next(request, 302, count: 4))
        #expect(next.head.path == "/v1/chosen")
        #expect(next.urlString == Self.origin + "/v1/chosen")
        #expect(next.head.headerFields[HTTPField.Name("X-Chosen")!] == "1")
        let first = seen.withLock { $0.first }
        let hop = try #require(first)
        #expect(hop.request.method == .post)
        #expect(hop.response.status == .found)
        #expect(hop.proposed.method == .get)
        #expect(hop.proposed.path == "/v1/next")
        #expect(hop.count == 4)
    }

    @Test func aHandlerThatTurnsARepeatIntoAGETDropsTheBody() throws {
        let request = Self.request(.put, body: Self.body) { hop in
            var next = hop.proposed
            next.method = .get
            return next
        }
        let next = try #require(try Self.next(request, 307))
        #expect(next.head.method == .get)
        #expect(next.body == nil)
    }

    @Test func aHandlerThatStopsMakesTheRedirectTheAnswer() throws {
        #expect(try Self.next(Self.request(.get) { _ in nil }, 302) == nil)
    }

    @Test func aHandlerMayNotLeaveHTTP() {
        let request = Self.request(.get) { hop in
            var next = hop.proposed
            next.scheme = "ftp"
            return next
        }
        #expect {
            try Self.next(request, 302)
        } throws: { error in
            if case CourierError.invalidURL = error { true } else { false }
        }
    }

    @Test func aHostKnownForHSTSIsReachedOverHTTPS() throws {
        let hsts = HSTSStore(file: nil)
        hsts.record("max-age=600", host: "secure.example.com")
        var request = Self.request(.get)
        request.hsts = hsts
        let next = try #require(try Self.next(request, 302, to: "http://secure.example.com/page"))
        #expect(next.urlString == "https://secure.example.com/page")
        #expect(next.head.scheme == "https")
        let other = try #require(try Self.next(request, 302, to: "http://plain.example.com/page"))
        #expect(other.urlString == "http://plain.example.com/page")
    }
}
