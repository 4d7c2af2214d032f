import CCurlShim
import CourierCore
import CourierTransport
import Foundation
import HTTPTypes

/// What to do with a transfer libcurl reports done: follow a redirect, or finish.
enum TransferOutcome {
    case redirect(TransferRequest)
    /// The hop once more, with transfer codings passed through (see `Transfer.unknownTransferCoding`).
    case resendPassingTransferCodings
    case done(Result<TransferOutput, any Error>)

    /// Reads the result of the current hop from the easy handle. Engine thread.
    static func evaluate(_ transfer: Transfer, easy: UnsafeMutableRawPointer, code: CURLcode) -> TransferOutcome {
        EngineThread.check(transfer.engine, "TransferOutcome.evaluate")
        // A redirect whose body was cut short on purpose ends with CURLE_WRITE_ERROR: followed.
        let redirectCut = code == CURLE_WRITE_ERROR && transfer.cutRedirectBody && transfer.discardingBody
        if code == CURLE_WRITE_ERROR, transfer.unknownTransferCoding {
            return resendOrRefuse(transfer)
        }
        if code != CURLE_OK, !redirectCut {
            let request = transfer.current
            let body = transfer.endSink(.failed)
            if let failure = transfer.callbackFailure {
                let metrics = failureMetrics(transfer, easy, error: failure)
                return .done(
                    .failure(
                        failure.withContext {
                            if $0.url == nil { $0.url = request.url }
                            $0.metrics = metrics
                        }))
            }
            let context = CourierError.Context(
                url: request.url, response: transfer.head.isComplete ? transfer.head.response : nil,
                body: body.isEmpty ? nil : body, message: "")
            let detail = transfer.errorBuffer.map { String(cString: $0) } ?? ""
            var verifyResult = 0
            courier_easy_getinfo_long(easy, CURLINFO_SSL_VERIFYRESULT, &verifyResult)
            var error = CourierError.fromCurl(
                code, detail: detail, context: context, stage: stage(of: transfer, easy), verifyResult: verifyResult)
            if let trust = transfer.trustContext { error = trust.explain(error) }
            let metrics = failureMetrics(transfer, easy, error: error)
            error = error.withContext { context in
                if code == CURLE_COULDNT_CONNECT, let path = request.sharedOptions.value.unixSocketPath {
                    // libcurl names the URL's host and port, which a socket request never reaches.
                    context.message = unixSocketMessage(path)
                }
                context.metrics = metrics
            }
            return .done(.failure(error))
        }
        guard transfer.head.isComplete, transfer.head.statusCode != 0 else {
            _ = transfer.endSink(.failed)
            return .done(
                .failure(
                    CourierError.invalidResponse(
                        .init(
                            url: transfer.current.url,
                            message: "The server closed the connection without a response head"))))
        }
        if transfer.head.transferEncodingOverrodeLength { retireConnection(easy) }
        if transfer.discardingBody, let response = transfer.head.response {
            let request = transfer.current
            do {
                let location = redirectLocation(easy, response: response, base: request.url)
                if let next = try RedirectPolicy.nextRequest(
                    after: request, response: response, location: location, redirectCount: transfer.redirectCount)
                {
                    return .redirect(next)
                }
                // The redirect handler stopped here: the redirect, without its body, is the answer.
            } catch {
                _ = transfer.endSink(.failed)
                return .done(.failure(error))
            }
        }
        if transfer.awaitingAuthRetry {
            // The credential did not do: the 401 (or 407), without its body, is the answer.
            transfer.withdrawChallenge()
            _ = transfer.sink.begin(transfer.head, expectedLength: nil)
        }
        if let incomplete = transfer.sinkIncompleteness() {
            _ = transfer.endSink(.failed)
            return .done(.failure(incomplete.withContext { if $0.url == nil { $0.url = transfer.current.url } }))
        }
        // The final hop's request and head are added where the response is made (`final`).
        let metrics = TransferMetrics(
            figuresOf: transaction(transfer, easy, withHeads: false), after: transfer.earlierHops[...],
            redirectCount: transfer.redirectCount)
        return .done(
            .success(
                TransferOutput(
                    request: transfer.current.head, head: transfer.head, body: transfer.endSink(.completed),
                    metrics: metrics))
        )
    }

    /// A response in a transfer coding libcurl cannot decode, which from 8.5 it would fail on:
    /// a request that may be sent twice goes again with transfer codings passed through (the
    /// body then ends where the connection does, as RFC 9112 section 6.3 says for a coding
    /// other than a final `chunked`), any other fails.
    private static func resendOrRefuse(_ transfer: Transfer) -> TransferOutcome {
        let request = transfer.current
        let safe: Set<HTTPRequest.Method> = [.get, .head, .options, .trace]
        if safe.contains(request.head.method), request.body == nil {
            return .resendPassingTransferCodings
        }
        _ = transfer.endSink(.failed)
        let codings = transfer.head.values(of: "transfer-encoding").joined(separator: ", ")
        return .done(
            .failure(
                CourierError.invalidResponse(
                    .init(
                        url: request.url, response: transfer.head.response,
                        message:
                            "The response's Transfer-Encoding '\(codings)' has a coding libcurl \(CurlRuntime.version) "
                            + "cannot decode, and a \(request.head.method.rawValue) is not sent twice to read it otherwise"
                    ))))
    }

    /// Why a connection to the Unix socket at `path` failed, naming the socket: the path is
    /// missing, or names something other than a socket, or no server accepts on it.
    static func unixSocketMessage(_ path: String) -> String {
        var info = stat()
        let reason: String
        if stat(path, &info) != 0 {
            reason = String(cString: strerror(errno))
        } else {
            switch info.st_mode & S_IFMT {
            case S_IFSOCK: reason = "no server accepts connections on it"
            case S_IFDIR: reason = "it is a directory, not a socket"
            case S_IFREG: reason = "it is a regular file, not a socket"
            default: reason = "it is not a socket"
            }
        }
        return "Cannot connect to the Unix socket \(path): \(reason)"
    }

    /// libcurl's resolution of `Location` against the current URL (CURLINFO_REDIRECT_URL), or
    /// Foundation's when libcurl has none (it refuses some schemes).
    private static func redirectLocation(_ easy: UnsafeMutableRawPointer, response: HTTPResponse, base: URL?) -> String
    {
        var pointer: UnsafePointer<CChar>?
        if courier_easy_getinfo_string(easy, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer {
            return String(cString: pointer)
        }
        let location = response.headerFields[.location] ?? ""
        return URL(string: location, relativeTo: base)?.absoluteString ?? location
    }

    /// How far the transfer had come when libcurl failed it, for telling its codes apart by
    /// what they can mean there, not by libcurl's words (which change between versions).
    private static func stage(of transfer: Transfer, _ easy: UnsafeMutableRawPointer) -> CourierError.ResponseStage {
        let head = transfer.head
        guard head.isComplete else {
            if requestWasSent(easy) { return .readingHead(sawContentLength: head.contentLength != nil) }
            return transfer.current.sharedOptions.value.tls.clientIdentity != nil ? .loadingClientIdentity : .other
        }
        guard FieldList.lowercasedItems(head.values(of: "transfer-encoding")).last == "chunked" else { return .other }
        var systemError = 0
        courier_easy_getinfo_long(easy, CURLINFO_OS_ERRNO, &systemError)
        return .readingChunkedBody(
            systemError: systemError, overTLS: transfer.current.urlString.lowercased().hasPrefix("https:"))
    }

    /// Whether the request went out (CURLINFO_REQUEST_SIZE): a failure from then on until the
    /// response head is complete is about what the server sent.
    private static func requestWasSent(_ easy: UnsafeMutableRawPointer) -> Bool {
        var size = 0
        courier_easy_getinfo_long(easy, CURLINFO_REQUEST_SIZE, &size)
        return size > 0
    }

    /// Keeps the connection the transfer used from carrying another request, after a response
    /// whose framing a sender may have meant to be read two ways. libcurl 7.88 keeps such a
    /// connection for reuse and has no call to drop one; shutting the socket down makes it look
    /// closed by the server, which libcurl checks before reusing a connection.
    private static func retireConnection(_ easy: UnsafeMutableRawPointer) {
        if let socket = activeSocket(easy) { courier_socket_retire(socket) }
    }

    /// The socket of the connection the transfer used, while libcurl still holds it (from when
    /// libcurl is done with the transfer, and only if it keeps the connection).
    static func activeSocket(_ easy: UnsafeMutableRawPointer) -> curl_socket_t? {
        var socket = CURL_SOCKET_BAD
        guard courier_easy_getinfo_socket(easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else {
            return nil
        }
        return socket
    }

    /// The metrics of a transfer that failed on its current hop: the hops before it and the
    /// failed one, with what libcurl measured of it.
    private static func failureMetrics(
        _ transfer: Transfer, _ easy: UnsafeMutableRawPointer, error: CourierError
    )
        -> TransferMetrics
    {
        transfer.withdrawChallenge()  // the failure's transaction has its head
        var failed = transaction(transfer, easy)
        failed.failure = error.context.description
        return TransferMetrics(transactions: transfer.earlierHops + [failed], redirectCount: transfer.redirectCount)
    }

    /// The current hop's request, response head (when complete; parsed here) and figures;
    /// without `withHeads`, no response head. Engine thread.
    static func transaction(
        _ transfer: Transfer, _ easy: UnsafeMutableRawPointer, withHeads: Bool = true
    )
        -> TransactionMetrics
    {
        func time(_ info: CURLINFO) -> Duration {
            var value: curl_off_t = 0
            courier_easy_getinfo_off_t(easy, info, &value)
            return .microseconds(value)
        }
        func size(_ info: CURLINFO) -> Int64 {
            var value: curl_off_t = 0
            courier_easy_getinfo_off_t(easy, info, &value)
            return Int64(value)
        }
        func long(_ info: CURLINFO) -> Int {
            var value = 0
            courier_easy_getinfo_long(easy, info, &value)
            return value
        }
        var metrics = TransactionMetrics(
            request: transfer.current.head,
            response: withHeads && transfer.head.isComplete ? transfer.head.response : nil)
        metrics.nameLookup = time(CURLINFO_NAMELOOKUP_TIME_T)
        metrics.connect = time(CURLINFO_CONNECT_TIME_T)
        metrics.tlsHandshake = time(CURLINFO_APPCONNECT_TIME_T)
        metrics.firstByte = time(CURLINFO_STARTTRANSFER_TIME_T)
        metrics.duration = time(CURLINFO_TOTAL_TIME_T)
        metrics.bytesReceived = size(CURLINFO_SIZE_DOWNLOAD_T)
        metrics.bytesSent = size(CURLINFO_SIZE_UPLOAD_T)
        metrics.reusedConnection = long(CURLINFO_NUM_CONNECTS) == 0
        switch long(CURLINFO_HTTP_VERSION) {
        case CURL_HTTP_VERSION_1_0: metrics.httpVersion = "1.0"
        case CURL_HTTP_VERSION_1_1: metrics.httpVersion = "1.1"
        case CURL_HTTP_VERSION_2_0: metrics.httpVersion = "2"
        case CURL_HTTP_VERSION_3: metrics.httpVersion = "3"
        default: metrics.httpVersion = ""
        }
        var ip: UnsafePointer<CChar>?
        if courier_easy_getinfo_string(easy, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK, let ip {
            metrics.remoteIP = String(cString: ip)
            metrics.remotePort = long(CURLINFO_PRIMARY_PORT)
        }
        metrics.localPort = long(CURLINFO_LOCAL_PORT)
        if metrics.localPort <= 0 {
            // libcurl 7.76 leaves the local port unset (-1) on a reused connection: ask the
            // connection's socket, which is still the transfer's here.
            metrics.localPort = activeSocket(easy).map { Int(courier_socket_local_port($0)) } ?? 0
        }
        return metrics
    }
}
