import CCurlShim
@_spi(CourierInternals) import CourierCore
import CourierStorage
import CourierTransport
import Foundation
import HTTPTypes

// libcurl's per-transfer callbacks. Each receives the `Transfer` as its user data pointer
// (unretained: the engine's `active` table holds the transfer while its handle is on the multi
// handle) and runs on the engine thread, inside `curl_multi_socket_action` or `curl_easy_pause`.

/// CURLOPT_WRITEFUNCTION: body bytes, already content-decoded by libcurl.
let transferWriteCallback: curl_write_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: buffer, count: size * count))
}

/// CURLOPT_HEADERFUNCTION: one header line at a time, status lines and blank lines included.
let transferHeaderCallback: curl_write_callback = { buffer, size, count, userdata in
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata!).takeUnretainedValue()
    return transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: buffer, count: size * count))
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
        passesCodingsThroughIfUnknown()
        if head.hasSetCookie, current.options.handlesCookies { engine.cookies?.responseMaySetCookies() }
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
        // With a content encoding, Content-Length counts encoded bytes, not what we receive.
        expectedBytes = head.hasContentEncoding ? nil : head.contentLength
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

    /// A response in a coding libcurl cannot decode (`Content-Encoding: foo`, or a
    /// `Transfer-Encoding` other than chunked and the compressions) is handed on as it came,
    /// with its `Content-Encoding` kept, as browsers do: libcurl would fail the transfer with
    /// "Unrecognized content encoding type" at the first body byte. libcurl reads the decoding
    /// switch when body bytes arrive (7.88: `readwrite_data` and the chunk parser test
    /// `http_ce_skip`), so turning it off here, after the head, takes effect for this body.
    /// Only the codings are checked that libcurl would apply; the switch is turned on again for
    /// the next response of the transfer and before the handle is reused (`EasyHandlePool`).
    private func passesCodingsThroughIfUnknown() {
        var undecodable = false
        if head.hasContentEncoding || head.hasTransferCoding, let easy {
            let codings = FieldList.lowercasedItems(
                head.values(of: "content-encoding") + head.values(of: "transfer-encoding"))
            undecodable = codings.contains { !CurlRuntime.decodableCodings.contains($0) }
            if undecodable != decodingOff {
                courier_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, undecodable ? 0 : 1)
            }
        } else if decodingOff, let easy {
            courier_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 1)
        }
        decodingOff = undecodable
    }

    /// The hop ends with the 401 (or 407) libcurl was expected to answer: it is the answer, not
    /// an exchange before it, so its transaction leaves `earlierHops`. Engine thread.
    func withdrawChallenge() {
        guard awaitingAuthRetry else { return }
        awaitingAuthRetry = false
        earlierHops.removeLast()
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
            return courier_write_func_pause
        }
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
            refund(bytes.count)
            pause.receiveBackpressure = true
            appliedPauseMask |= Int32(CURLPAUSE_RECV)
            return courier_write_func_pause
        case .failed(let error):
            callbackFailure = error
            return bytes.count == 0 ? 1 : 0  // any other count aborts with CURLE_WRITE_ERROR
        }
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
