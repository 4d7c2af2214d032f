@_spi(CourierInternals) import CourierCore
import Testing

/// The parser's reading of `Content-Length`, without a server.
@Suite struct ResponseHeadParserLengthTests {
    /// Feeds a status line, `fields` and the blank line; returns the first complaint, if any.
    private func parse(_ fields: [String]) -> (ResponseHeadParser, String?) {
        var parser = ResponseHeadParser()
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
@Suite struct ResponseHeadParserLimitTests {
    @Test func theLimitCountsEveryHeadOfARequestAndStartsOverForTheNext() {
        var parser = ResponseHeadParser()
        let filler = "X-Filler: " + String(repeating: "x", count: 1000) + "\r\n"
        func feed(_ line: String) -> ResponseHeadParser.LineResult {
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
