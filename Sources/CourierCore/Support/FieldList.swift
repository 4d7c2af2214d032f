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
}
