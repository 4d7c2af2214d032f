/// The items of comma-separated field values (`Vary`, `Connection`, `Content-Encoding`, the
/// names in `no-cache="..."`): split at commas, trimmed of spaces and tabs, lower-cased, empty
/// ones dropped.
package enum FieldList {
    package static func lowercasedItems(_ values: some Sequence<String>) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { trimmed($0).lowercased() }.filter { !$0.isEmpty }
    }

    /// `text` without leading and trailing spaces and tabs.
    private static func trimmed(_ text: Substring) -> Substring {
        let isTrimmed: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isTrimmed($0) }),
            let last = text.lastIndex(where: { !isTrimmed($0) })
        else { return "" }
        return text[first...last]
    }

    /// Whether the comma-separated field value `value` (UTF-8) has the item `*` (as `Vary: *`
    /// has), without making strings.
    package static func hasWildcardItem(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        var item = 0  // 0: nothing but spaces yet, 1: exactly "*" so far, 2: something else
        for byte in value {
            switch byte {
            case UInt8(ascii: ","):
                if item == 1 { return true }
                item = 0
            case UInt8(ascii: " "), UInt8(ascii: "\t"):
                continue
            case UInt8(ascii: "*") where item == 0:
                item = 1
            default:
                item = 2
            }
        }
        return item == 1
    }
}
