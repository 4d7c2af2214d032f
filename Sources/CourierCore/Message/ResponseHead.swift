import HTTPTypes

/// A response head that is turned into an `HTTPResponse` (validated, canonicalised
/// `HTTPFields`) only when somebody asks for it. The status and single field values are read
/// from the recorded lines without building the fields, which is all most response serializers
/// need. The parsed response is kept, guarded by `state`.
package final class ResponseHead: Sendable {
    private enum State {
        case recorded(RecordedHead)
        case parsed(HTTPResponse)
    }

    private let state: Locked<State>
    /// The status, known without parsing the fields.
    package let status: HTTPResponse.Status

    /// The trailer fields that followed the body, when any came.
    package let trailers: HTTPFields?

    package init(recorded: RecordedHead) {
        state = Locked(.recorded(recorded))
        status = recorded.status
        trailers = recorded.trailers
    }

    package init(parsed: HTTPResponse, trailers: HTTPFields? = nil) {
        state = Locked(.parsed(parsed))
        status = parsed.status
        self.trailers = trailers
    }

    /// The whole response head, parsed on first use.
    package var response: HTTPResponse {
        state.withLock { state in
            switch state {
            case .parsed(let response):
                return response
            case .recorded(let recorded):
                let response = recorded.response ?? HTTPResponse(status: status)
                state = .parsed(response)
                return response
            }
        }
    }

    /// The last value of the field `name` (lower-case), without parsing the other fields.
    package func lastValue(of name: HTTPField.Name) -> String? {
        state.withLock { state in
            switch state {
            case .parsed(let response): response.headerFields[values: name].last
            case .recorded(let recorded): recorded.lastValue(of: name.canonicalName)
            }
        }
    }

    /// Every value of the field `name`, in order, without parsing the other fields.
    package func values(of name: HTTPField.Name) -> [String] {
        state.withLock { state in
            switch state {
            case .parsed(let response): response.headerFields[values: name]
            case .recorded(let recorded): recorded.values(of: name.canonicalName)
            }
        }
    }
}
