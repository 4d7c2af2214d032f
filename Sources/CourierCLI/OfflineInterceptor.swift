import Courier
import Foundation
import HTTPTypes

/// `--offline`: the last interceptor of the session, it stops every request after it has been
/// built and adapted, before anything is sent, and hands it back to be printed.
struct OfflineInterceptor: RequestInterceptor {
    /// What stops the request: carries it out of the pipeline.
    struct Stopped: Error {
        var request: HTTPRequest
    }

    func adapt(_ request: HTTPRequest, context: RequestContext) async throws -> HTTPRequest {
        throw Stopped(request: request)
    }

    /// The request `invocation` would send through `api` (whose session has this interceptor).
    static func request(of invocation: Invocation, with api: HTTPSessionManager) async throws -> HTTPRequest {
        do {
            _ = try await invocation.send(with: api, progress: nil)
        } catch let stopped as Stopped {
            return stopped.request
        }
        throw CLIError("--offline: the request was sent")
    }
}
