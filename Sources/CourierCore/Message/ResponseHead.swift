import HTTPTypes
import Synchronization

/// A response head that is turned into an `HTTPResponse` (validated, canonicalised
/// `HTTPFields`) only when somebody asks for it. The status and single field values are read
/// from the recorded lines without building the fields, which is all most response serializers
/// need. The parsed response, once made, is kept.
///
/// No lock: the recorded head never changes, and the parsed one is published once through an
/// atomic reference (two threads that parse at the same time make equal responses; the first
/// stored is the one every reader gets). A lock here was an allocation and two atomic
/// operations per read, for every response.
package final class ResponseHead: Sendable {
    /// The parsed response, boxed for `AtomicLazyReference`.
    private final class Parsed: Sendable {
        let response: HTTPResponse

        init(_ response: HTTPResponse) {
            self.response = response
        }
    }

    /// The head as received; nil for a head made parsed.
    private let recorded: RecordedHead?
    /// Set at `init(parsed:)`, or on the first use of `response`.
    private let parsed = AtomicLazyReference<Parsed>()
    /// The status, known without parsing the fields.
    package let status: HTTPResponse.Status

    /// The trailer fields that followed the body, when any came.
    package let trailers: HTTPFields?

    package init(recorded: RecordedHead) {
        self.recorded = recorded
        status = recorded.status
        trailers = recorded.trailers
    }

    package init(parsed: HTTPResponse, trailers: HTTPFields? = nil) {
        recorded = nil
        status = parsed.status
        self.trailers = trailers
        _ = self.parsed.storeIfNil(Parsed(parsed))
    }

    /// The whole response head, parsed on first use.
    package var response: HTTPResponse {
        if let parsed = parsed.load() { return parsed.response }
        let response = recorded?.response ?? HTTPResponse(status: status)
        return parsed.storeIfNil(Parsed(response)).response
    }

    /// The last value of the field `name` (lower-case), without parsing the other fields.
    package func lastValue(of name: HTTPField.Name) -> String? {
        if let parsed = parsed.load() { return parsed.response.headerFields[values: name].last }
        return recorded?.lastValue(of: name.canonicalName)
    }

    /// Calls `body` with the UTF-8 bytes of every value of the field `name`, in order, without
    /// parsing the other fields or making strings.
    package func forEachValue(of name: HTTPField.Name, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        if let parsed = parsed.load() {
            for var value in parsed.response.headerFields[values: name] { value.withUTF8(body) }
        } else {
            recorded?.forEachValueBytes(of: name.canonicalName, body)
        }
    }

    /// Every value of the field `name`, in order, without parsing the other fields.
    package func values(of name: HTTPField.Name) -> [String] {
        if let parsed = parsed.load() { return parsed.response.headerFields[values: name] }
        return recorded?.values(of: name.canonicalName) ?? []
    }
}
