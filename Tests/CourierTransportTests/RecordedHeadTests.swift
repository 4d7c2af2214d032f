@_spi(CourierInternals) import CourierCore
import HTTPTypes
import Testing

/// The parser's reading of `Content-Length`, without a server.
@Suite struct RecordedHeadLengthTests {
    /// Feeds a status line, `fields` and the blank line; returns the first complaint, if any.
    private func parse(_ fields: [String]) -> (RecordedHead, String?) {
        var parser = RecordedHead()
        for line in ["HTTP/1.1 200 OK"] + fields + [""] {
            var bytes = Array((line + "\r\n").utf8)
            let result = bytes.withUnsafeMutableBytes { parser.consume(UnsafeRawBufferPointer($0)) }
            if case .invalid(let message) = result { return (parser, message) }
        }
        return (parser, nil)
    }

    @Test func copiesOfOneNumberAreOneLength() {
        for fields in [
            ["Content-Length: 5"], ["Content-Length: 5", "content-length:5"], ["Content-Length: 5, 5"],
            ["Content-Length:  5 ,5 , 5 "], ["Content-Length: 9223372036854775807"],
        ] {
            let (parser, problem) = parse(fields)
            #expect(problem == nil, "\(fields)")
            #expect(parser.contentLength == (fields == ["Content-Length: 9223372036854775807"] ? .max : 5), "\(fields)")
        }
    }

    @Test func anythingElseIsRefused() {
        for value in ["", "abc", "-1", "+5", "1 2", "5,", "5,,5", "0x10", "9223372036854775808", "5, 6"] {
            let (_, problem) = parse(["Content-Length: \(value)"])
            #expect(problem?.hasPrefix("The response's Content-Length is not a valid length") == true, "'\(value)'")
        }
        let (_, problem) = parse(["Content-Length: 5", "Content-Length: 7"])
        #expect(problem == "The response has two different Content-Length values: 5 and 7")
    }

    @Test func transferEncodingOverridesTheLength() {
        let (parser, problem) = parse(["Content-Length: 3", "Transfer-Encoding: chunked"])
        #expect(problem == nil)
        #expect(parser.contentLength == nil)
        #expect(parser.transferEncodingOverrodeLength)
        let (plain, _) = parse(["Content-Length: 3"])
        #expect(plain.contentLength == 3)
        #expect(!plain.transferEncodingOverrodeLength)
    }
}

/// The limit on the size of response heads, without a server.
@Suite struct RecordedHeadLimitTests {
    @Test func theLimitCountsEveryHeadOfARequestAndStartsOverForTheNext() {
        var parser = RecordedHead()
        let filler = "X-Filler: " + String(repeating: "x", count: 1000) + "\r\n"
        func feed(_ line: String) -> RecordedHead.LineResult {
            var bytes = Array(line.utf8)
            return bytes.withUnsafeMutableBytes { parser.consume(UnsafeRawBufferPointer($0)) }
        }
        func feedHead(_ status: String, fillers: Int) -> String? {
            for line in [status + "\r\n"] + Array(repeating: filler, count: fillers) + ["\r\n"] {
                if case .invalid(let message) = feed(line) { return message }
            }
            return nil
        }
        // An interim head of 150 KB and a final head of 150 KB: 300 KB for the request.
        #expect(feedHead("HTTP/1.1 103 Early Hints", fillers: 150) == nil)
        #expect(feedHead("HTTP/1.1 200 OK", fillers: 150) == "The response head is larger than 262144 bytes")
        parser.reset()
        #expect(feedHead("HTTP/1.1 200 OK", fillers: 250) == nil)
        #expect(parser.isComplete)
    }
}

/// What the parser records of a head: the status line, the fields (as `HTTPResponse` builds
/// them later), the facts the engine reads, interim heads and trailers.
@Suite struct RecordedHeadRecordingTests {
    /// Feeds each line with CRLF (a line already ending in a line break is fed as it is).
    private func feed(_ lines: [String], into parser: inout RecordedHead) -> [RecordedHead.LineResult] {
        lines.map { line in
            var bytes = Array((line.hasSuffix("\n") ? line : line + "\r\n").utf8)
            return bytes.withUnsafeMutableBytes { parser.consume(UnsafeRawBufferPointer($0)) }
        }
    }

    private func parsed(_ lines: [String]) -> RecordedHead {
        var parser = RecordedHead()
        _ = feed(lines, into: &parser)
        return parser
    }

    @Test func theStatusLineGivesTheCodeAndReasonPhrase() {
        let parser = parsed(["HTTP/1.1 404 Not Found", ""])
        #expect(parser.isComplete)
        #expect(parser.statusCode == 404)
        #expect(parser.status.reasonPhrase == "Not Found")
        let http2 = parsed(["HTTP/2 204", ""])
        #expect(http2.statusCode == 204)
        #expect(http2.status.reasonPhrase == "")
        #expect(parsed(["HTTP/1.1 OK", ""]).response == nil)  // no code: no head
        #expect(parsed(["HTTP/1.1 099 Low", ""]).response == nil)
    }

    @Test func eachLineIsPartialUntilTheBlankOne() {
        var parser = RecordedHead()
        let results = feed(["HTTP/1.1 200 OK", "Content-Type: text/plain", ""], into: &parser)
        #expect(results.map { "\($0)" } == ["partial", "partial", "complete"])
    }

    @Test func theFieldsKeepTheirOrderRepeatsAndValues() throws {
        let parser = parsed([
            "HTTP/1.1 200 OK", "Content-Type:  text/html ; charset=utf-8 ", "Set-Cookie: a=1", "set-cookie: b=2",
            "X-Custom-Thing: yes", "Bad Name: dropped", ": nameless", "WWW-Authenticate: Basic realm=\"r\"", "",
        ])
        let response = try #require(parser.response)
        #expect(response.status == .ok)
        #expect(response.headerFields[.contentType] == "text/html ; charset=utf-8")
        #expect(response.headerFields[values: .setCookie] == ["a=1", "b=2"])
        #expect(response.headerFields[HTTPField.Name("x-custom-thing")!] == "yes")
        #expect(response.headerFields[.wwwAuthenticate] == #"Basic realm="r""#)
        #expect(response.headerFields.count == 5)  // the invalid names are skipped
        #expect(parser.values(of: "set-cookie") == ["a=1", "b=2"])
        #expect(parser.lastValue(of: "content-type") == "text/html ; charset=utf-8")
        #expect(parser.lastValue(of: "etag") == nil)
        #expect(parser.hasSetCookie)
    }

    @Test func theFactsTheEngineReadsArePickedOut() {
        let redirect = parsed(["HTTP/1.1 302 Found", "location: /next", "Content-Encoding: gzip", ""])
        #expect(redirect.hasLocation)
        #expect(redirect.hasContentEncoding)
        #expect(!redirect.hasTransferCoding)
        let plain = parsed(["HTTP/1.1 200 OK", "Content-Length: 0", ""])
        #expect(!plain.hasLocation && !plain.hasContentEncoding && !plain.hasSetCookie)
        let chunked = parsed(["HTTP/1.1 200 OK", "Transfer-Encoding: Chunked", ""])
        #expect(!chunked.hasTransferCoding)
        let coded = parsed(["HTTP/1.1 200 OK", "Transfer-Encoding: gzip, chunked", ""])
        #expect(coded.hasTransferCoding)
    }

    @Test func anInterimHeadIsReplacedByTheFinalOne() throws {
        var parser = RecordedHead()
        _ = feed(["HTTP/1.1 103 Early Hints", "Link: </style.css>; rel=preload", ""], into: &parser)
        #expect(parser.isComplete)
        #expect(parser.isInterim)
        _ = feed(["HTTP/1.1 200 OK", "Content-Length: 2", ""], into: &parser)
        #expect(!parser.isInterim)
        let response = try #require(parser.response)
        #expect(response.status == .ok)
        #expect(response.headerFields[HTTPField.Name("Link")!] == nil)  // the interim head's fields are gone
        #expect(parser.contentLength == 2)
    }

    @Test func trailersAndObsoleteFoldingAreLeftOut() throws {
        var parser = RecordedHead()
        let results = feed(
            ["HTTP/1.1 200 OK", "X-Folded: first", "  continued", "", "X-Trailer: late", "Content-Length: 9", ""],
            into: &parser)
        #expect(results.suffix(3).map { "\($0)" } == ["partial", "partial", "partial"])
        let response = try #require(parser.response)
        #expect(response.headerFields[HTTPField.Name("X-Folded")!] == "first")
        #expect(response.headerFields[HTTPField.Name("X-Trailer")!] == nil)
        #expect(parser.contentLength == nil)  // a trailer's length changes nothing
    }

    @Test func resetStartsANewRequest() {
        var parser = RecordedHead()
        _ = feed(["HTTP/1.1 301 Moved", "Location: /a", "Content-Length: 4", ""], into: &parser)
        parser.reset()
        #expect(!parser.isComplete)
        #expect(parser.statusCode == 0)
        #expect(parser.contentLength == nil)
        #expect(!parser.hasLocation)
        #expect(parser.response == nil)
    }
}
