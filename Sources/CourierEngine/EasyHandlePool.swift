import CCurlShim
import CourierTransport

/// Idle easy handles of one engine, for reuse. Engine thread only.
///
/// A handle whose last transfer was plain (a GET or HEAD without body, see
/// `TransferRequest.isPlain`) is kept "clean" together with the options it was configured
/// with: the next plain transfer with the same options only sets what differs per request.
/// Every other handle is reset (`curl_easy_reset`) before reuse, so no option leaks from one
/// transfer into the next. A reset keeps a handle's share (and so its cookies), so a handle
/// that has joined the cookie share is only reused for transfers that handle cookies.
struct EasyHandlePool {
    private var clean: [(handle: UnsafeMutableRawPointer, options: SharedTransferOptions)] = []
    private var dirty: [(handle: UnsafeMutableRawPointer, sharesCookies: Bool)] = []
    /// The most idle handles kept.
    static let limit = 256

    /// A handle for `transfer`; sets `transfer.handleIsClean` for `configure`.
    mutating func take(for transfer: Transfer) -> UnsafeMutableRawPointer {
        if transfer.hop.isPlain, let last = clean.last, last.options.isEqual(to: transfer.current.sharedOptions) {
            clean.removeLast()
            transfer.handleIsClean = true
            return last.handle
        }
        transfer.handleIsClean = false
        let wantsCookies = transfer.current.sharedOptions.value.handlesCookies
        if let index = dirty.lastIndex(where: { wantsCookies || !$0.sharesCookies }) {
            let handle = dirty.remove(at: index).handle
            Self.reset(handle)
            return handle
        }
        if let index = clean.lastIndex(where: { wantsCookies || !$0.options.value.handlesCookies }) {
            let handle = clean.remove(at: index).handle
            Self.reset(handle)
            return handle
        }
        return CurlRuntime.handle(curl_easy_init)!
    }

    /// `curl_easy_reset`, without libcurl 7.88's leak: setting `CURLOPT_COOKIEFILE` queues a
    /// list node that only the start of a transfer frees, and a reset before then loses it
    /// (curl/curl#10709, fixed in 8.0). That happens to a handle whose transfer was
    /// configured and then cancelled or refused before libcurl started it. Clearing the
    /// option frees the list; for a handle in the cookie share it drops only the handle's
    /// link to the shared jar, which `CookieEngine.attach` sets again.
    static func reset(_ handle: UnsafeMutableRawPointer) {
        courier_easy_setopt_string(handle, CURLOPT_COOKIEFILE, nil)
        curl_easy_reset(handle)
    }

    mutating func giveBack(_ handle: UnsafeMutableRawPointer, after transfer: Transfer) {
        guard clean.count + dirty.count < Self.limit else {
            curl_easy_cleanup(handle)
            return
        }
        if transfer.hop.isPlain && transfer.redirectCount == 0 && transfer.callDeadline == nil
            && !transfer.passesTransferCodingsThrough && transfer.current.sharedOptions.value.tls.hosts.isEmpty
        {
            clean.append((handle, transfer.current.sharedOptions))
        } else {
            dirty.append((handle, transfer.current.sharedOptions.value.handlesCookies))
        }
    }

    mutating func removeAll() {
        for entry in clean { curl_easy_cleanup(entry.handle) }
        for entry in dirty { curl_easy_cleanup(entry.handle) }
        clean.removeAll()
        dirty.removeAll()
    }
}
