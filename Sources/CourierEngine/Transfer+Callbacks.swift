import CCurlShim
import CourierCore
import CourierTransport
import Foundation

// libcurl's per-transfer callbacks. Each receives the `Transfer` as its user data pointer
// (unretained: the engine's `active` table holds the transfer while its handle is on the multi
// handle) and runs on the engine thread, inside `curl_multi_socket_action` or `curl_easy_pause`.

/// CURLOPT_WRITEFUNCTION: body bytes, already content-decoded by libcurl.
///
/// The transfer is borrowed, not retained: the engine keeps it alive while libcurl runs it,
/// and this runs for every piece of every body (the header callback, for every line).
let transferWriteCallback: curl_write_callback = { buffer, size, count, userdata in
    Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef {
        $0.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
    }
}

/// CURLOPT_HEADERFUNCTION: one header line at a time, status lines and blank lines included.
let transferHeaderCallback: curl_write_callback = { buffer, size, count, userdata in
    Unmanaged<Transfer>.fromOpaque(userdata!)._withUnsafeGuaranteedRef {
        $0.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
    }
}

/// CURLOPT_READFUNCTION: request body bytes, on demand.
let transferReadCallback: curl_read_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.sendBody(UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
}

/// CURLOPT_SEEKFUNCTION: libcurl wants to send the body again from the start.
let transferSeekCallback: curl_seek_callback = { userdata, offset, origin in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    guard offset == 0, origin == SEEK_SET, let reader = transfer.bodyReader, reader.rewind() else {
        return courier_seekfunc_cantseek
    }
    transfer.sentBytes = 0
    return courier_seekfunc_ok
}

/// Status codes whose `Location` Courier follows (RFC 9110 section 15.4).
private let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]

/// The most of a redirect's body that is read (and thrown away). Reading a short body to its
/// end keeps the connection for the next hop; a longer one, or one that never ends, is not
/// worth the wait (a hostile server can stream one forever): the hop ends at this point, its
/// connection is closed, and the redirect is followed all the same.
let redirectBodyLimit = 16 << 10

extension Transfer {
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) -> Int {
        switch head.consume(line) {
        case .partial:
            return line.count
        case .invalid(let message):
            callbackFailure = .invalidResponse(.init(message: message))
            return 0  // aborts the transfer with CURLE_WRITE_ERROR
        case .complete:
            guard !head.isInterim else { return line.count }
        }
        if head.hasSetCookie, current.sharedOptions.value.handlesCookies { engine.cookies?.responseMaySetCookies() }
        current.observer?.transferReceivedHead(head, for: current.head)
        awaitingAuthRetry = false
        if head.statusCode == 401 || head.statusCode == 407, hasCredential(forStatus: head.statusCode), let easy {
            // libcurl answers it with the credential: the challenge is a request and response
            // of its own in the metrics, unless it turns out to be the answer after all
            // (`withdrawChallenge`).
            var challenge = TransferOutcome.transaction(self, easy, withHeads: false)
            challenge.response = head.response
            earlierHops.append(challenge)
            awaitingAuthRetry = true
            return line.count
        }
        if hop.followRedirects, redirectStatuses.contains(head.statusCode), head.hasLocation {
            discardingBody = true
            if !hop.isHead, let length = head.contentLength, length > redirectBodyLimit {
                cutRedirectBody = true
                return 0  // ends the hop with CURLE_WRITE_ERROR; `TransferOutcome` follows it
            }
            return line.count
        }
        if head.hasTransferCoding, CurlRuntime.decodesTransferCodings, !passesTransferCodingsThrough,
            transferCodings.contains(where: { !Self.libcurlDecodes($0) })
        {
            // libcurl would fail at the body's first byte: end the hop here, before the sink
            // begins, and send it again with transfer codings passed through (if it may be).
            unknownTransferCoding = true
            return 0
        }
        decoder = makeDecoder()
        // With a coding, Content-Length counts coded bytes, not what we receive.
        expectedBytes = head.hasContentEncoding || head.hasTransferCoding ? nil : head.contentLength
        if let limit = current.sharedOptions.value.maximumBodySize, let expectedBytes, expectedBytes > limit,
            !hop.isHead, head.statusCode != 204, head.statusCode != 304
        {
            // Refused from its Content-Length (when a body follows), before a byte of it goes
            // to the sink.
            callbackFailure = .bodyOverLimit(limit, response: head.response)
            return 0
        }
        if let failure = sink.begin(head, expectedLength: expectedBytes) {
            callbackFailure = failure
            return 0  // aborts the transfer with CURLE_WRITE_ERROR
        }
        progressOffset = sink.progressOffset
        if let reporters, reporters.head.isWanted, let response = head.response { reporters.head.arrived(response) }
        reporters?.download.update(
            completedBytes: progressOffset, totalBytes: expectedBytes.map { $0 + progressOffset })
        return line.count
    }

    /// The hop ends with the 401 (or 407) libcurl was expected to answer: it is the answer, not
    /// an exchange before it, so its transaction leaves `earlierHops`. Engine thread.
    func withdrawChallenge() {
        guard awaitingAuthRetry else { return }
        awaitingAuthRetry = false
        earlierHops.removeLast()
    }

    /// The transfer codings of the current head other than `chunked`, in the order applied.
    private var transferCodings: [String] {
        FieldList.lowercasedItems(head.values(of: "transfer-encoding")).filter { $0 != "chunked" }
    }

    /// The transfer codings libcurl decodes when asked (`CurlRuntime.asksForTransferDecoding`).
    private static func libcurlDecodes(_ coding: String) -> Bool {
        ["gzip", "x-gzip", "deflate", "identity"].contains(coding)
    }

    /// The decoder for the current head's body: its transfer codings when libcurl leaves them
    /// (or passes them through), then its content codings when the session asked for
    /// compressed responses. nil when there is nothing to decode, or a coding Courier does not
    /// know (the body is handed on as it came).
    private func makeDecoder() -> BodyDecoder? {
        guard head.hasContentEncoding || head.hasTransferCoding else { return nil }
        var codings: [String] = []
        if head.hasTransferCoding, !CurlRuntime.decodesTransferCodings || passesTransferCodingsThrough {
            codings = transferCodings
        }
        if head.hasContentEncoding, current.sharedOptions.value.acceptsCompressedResponses {
            // Content codings are applied before transfer codings, and undone after them.
            codings = FieldList.lowercasedItems(head.values(of: "content-encoding")) + codings
        }
        return BodyDecoder(codings: codings)
    }

    /// Whether libcurl holds a credential that answers this 401 (server) or 407 (proxy).
    private func hasCredential(forStatus status: Int) -> Bool {
        status == 407 ? current.proxyCredential != nil : current.credentials.credential(for: current.url) != nil
    }

    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if awaitingAuthRetry { return bytes.count }
        if discardingBody { return discardRedirectBody(bytes.count) }
        if !admit(bytes.count) {
            pause.receiveThrottled = true
            appliedPauseMask |= Int32(CURLPAUSE_RECV)
            engine.noteReceivingPaused(self)
            return courier_write_func_pause
        }
        if let decoder { return receiveCoded(bytes, decoder) }
        if let error = limitExceeded(adding: bytes.count) { return fail(error, bytes) }
        switch sink.write(bytes) {
        case .accepted:
            if !flushScheduled, sink.needsFlush {
                flushScheduled = true
                engine.scheduleFlush(self)
            }
            receivedBytes += Int64(bytes.count)
            reporters?.download.update(
                completedBytes: progressOffset + receivedBytes, totalBytes: expectedBytes.map { $0 + progressOffset })
            return bytes.count
        case .pause:
            return pauseReceiving(bytes)
        case .failed(let error):
            callbackFailure = error
            return bytes.count == 0 ? 1 : 0  // any other count aborts with CURLE_WRITE_ERROR
        }
    }

    /// Body bytes in a coding the decoder takes off: decoded, and the output written to the
    /// sink piece by piece. When the sink refuses a piece, the decoder keeps it with the rest
    /// of the chunk (it has taken all of it), and the callback answers "pause": libcurl hands
    /// the same chunk over again when the transfer goes on, and `redelivered` says how much of
    /// that the decoder has already.
    private func receiveCoded(_ bytes: UnsafeRawBufferPointer, _ decoder: BodyDecoder) -> Int {
        let scratch = engine.decodingScratch()
        var failure: CourierError?
        let deliver: (UnsafeRawBufferPointer) -> SinkWrite = { piece in
            if let error = self.limitExceeded(adding: piece.count) {
                failure = error
                return .failed(error)
            }
            let result = self.sink.write(piece)
            switch result {
            case .accepted:
                if !self.flushScheduled, self.sink.needsFlush {
                    self.flushScheduled = true
                    self.engine.scheduleFlush(self)
                }
                self.receivedBytes += Int64(piece.count)
                self.reporters?.download.update(
                    completedBytes: self.progressOffset + self.receivedBytes, totalBytes: nil)
            case .failed(let error):
                failure = error
            case .pause:
                break
            }
            return result
        }
        do {
            if decoder.isHoldingBack, try !decoder.resume(scratch: scratch, deliver: deliver) {
                return failure.map { fail($0, bytes) } ?? pauseReceiving(bytes)
            }
            if let failure { return fail(failure, bytes) }
            var input = bytes
            if redelivered > 0 {
                let skipped = min(redelivered, bytes.count)
                redelivered -= skipped
                input = UnsafeRawBufferPointer(rebasing: bytes[skipped...])
            }
            if input.isEmpty { return bytes.count }
            codedBytes += Int64(input.count)
            if try !decoder.decode(input, scratch: scratch, deliver: deliver) {
                if let failure { return fail(failure, bytes) }
                redelivered = bytes.count
                return pauseReceiving(bytes)
            }
            if let failure { return fail(failure, bytes) }
            return bytes.count
        } catch {
            return fail(.invalidResponse(.init(message: error.message)), bytes)
        }
    }

    /// Why `count` more decoded body bytes may not go to the sink: past the request's size
    /// limit, or more than the decompression ratio allows for the coded bytes received (once
    /// 64 KiB are decoded: a small body may shrink by more than any ratio a large one should).
    /// nil when they may. The transfer adds the URL and the response when it reports it.
    private func limitExceeded(adding count: Int) -> CourierError? {
        let options = current.sharedOptions
        let total = receivedBytes + Int64(count)
        if let limit = options.value.maximumBodySize, total > limit {
            return .bodyOverLimit(limit)
        }
        if let ratio = options.value.maximumDecompressionRatio.map({ Int64(max($0, 1)) }), decoder != nil,
            total > 64 << 10, codedBytes <= Int64.max / ratio, total > codedBytes * ratio
        {
            return .responseTooLarge(
                .init(
                    message:
                        "The response body decodes to more than \(ratio) times its \(codedBytes) coded bytes (maximumDecompressionRatio)"
                ))
        }
        return nil
    }

    /// Answers libcurl's delivery of `bytes` with "pause": the sink is behind.
    private func pauseReceiving(_ bytes: UnsafeRawBufferPointer) -> Int {
        refund(bytes.count)
        pause.receiveBackpressure = true
        appliedPauseMask |= Int32(CURLPAUSE_RECV)
        engine.noteReceivingPaused(self)
        return courier_write_func_pause
    }

    /// Ends the transfer with `error`, found while taking `bytes`.
    private func fail(_ error: CourierError, _ bytes: UnsafeRawBufferPointer) -> Int {
        callbackFailure = error
        return bytes.count == 0 ? 1 : 0  // any other count aborts with CURLE_WRITE_ERROR
    }

    /// Throws a redirect's body away, up to `redirectBodyLimit`; past it, ends the hop.
    private func discardRedirectBody(_ count: Int) -> Int {
        discardedBytes += count
        guard discardedBytes > redirectBodyLimit else { return count }
        cutRedirectBody = true
        return count == 0 ? 1 : 0  // any other count ends the hop with CURLE_WRITE_ERROR
    }

    func sendBody(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let reader = bodyReader else { return 0 }
        if !admit(buffer.count) {
            pause.sendThrottled = true
            appliedPauseMask |= Int32(CURLPAUSE_SEND)
            return courier_readfunc_pause
        }
        switch reader.read(into: buffer) {
        case .bytes(let count):
            refund(buffer.count - count)
            sentBytes += Int64(count)
            reporters?.upload.update(completedBytes: sentBytes, totalBytes: hop.uploadLength)
            return count
        case .wait:
            refund(buffer.count)
            pause.sendWaiting = true
            appliedPauseMask |= Int32(CURLPAUSE_SEND)
            return courier_readfunc_pause
        case .failed(let error):
            callbackFailure = error
            return courier_readfunc_abort
        }
    }

    /// Takes `count` bytes from the session's and this transfer's bandwidth buckets. When
    /// either is empty, takes nothing and asks the engine to unpause at the later ready time.
    @inline(__always)
    private func admit(_ count: Int) -> Bool {
        guard engine.sessionBandwidth != nil || bandwidth != nil else { return true }
        return admitThrottled(count)
    }

    private func admitThrottled(_ count: Int) -> Bool {
        let session = engine.sessionBandwidth
        if let session, let ready = session.take(count) {
            engine.wake(self, at: max(ready, bandwidth?.readyTime() ?? 0))
            return false
        }
        if bandwidth != nil, bandwidth?.take(count) == false {
            session?.refund(count)
            engine.wake(self, at: bandwidth?.readyTime() ?? 0)
            return false
        }
        return true
    }

    private func refund(_ count: Int) {
        guard count > 0 else { return }
        engine.sessionBandwidth?.refund(count)
        bandwidth?.refund(count)
    }
}
