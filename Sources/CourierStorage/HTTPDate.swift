import Foundation

/// HTTP dates (RFC 9110 section 5.6.7): IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), and the
/// obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`)
/// forms, read with the tolerant algorithm of RFC 6265 section 5.1.1 (which cookies' `Expires`
/// needs anyway): the text is split into tokens at delimiters, and the first tokens that look
/// like a time, a day of the month, a month and a year are taken, in any order. The zone is
/// GMT, as HTTP requires.
///
/// The cache reads `Date`, `Expires` and `Last-Modified` for every lookup, so this walks the
/// UTF-8 bytes once, without a formatter, a lock or an allocation.
package enum HTTPDate {
    package static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(bytes: $0) }
    }

    /// An HTTP-date in exactly one of RFC 9110's three forms (section 5.6.7), names in any
    /// case: what a cache reads `Expires` with, where anything else is invalid and means
    /// "already expired" (RFC 9111 section 5.3). A two-digit year of the RFC 850 form is the
    /// year in the century that puts it at most 50 years ahead of `now`.
    package static func parseStrict(_ text: String, now: Date = Date()) -> Date? {
        let bytes = Array(text.utf8)
        func digits(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for index in range {
                guard isDigit(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        func literal(_ text: String, at start: Int) -> Bool {
            let expected = Array(text.utf8)
            guard start + expected.count <= bytes.count else { return false }
            return expected.indices.allSatisfy { bytes[start + $0] | 0x20 == expected[$0] | 0x20 }
        }
        func month(at start: Int) -> Int? {
            guard start + 3 <= bytes.count,
                let month = bytes[start..<(start + 3)].withContiguousStorageIfAvailable({ parseMonth($0) }) ?? nil
            else { return nil }
            return month
        }
        func time(at start: Int) -> (Int, Int, Int)? {
            guard start + 8 <= bytes.count, bytes[start + 2] == UInt8(ascii: ":"),
                bytes[start + 5] == UInt8(ascii: ":"),
                let hour = digits(start..<(start + 2)), let minute = digits((start + 3)..<(start + 5)),
                let second = digits((start + 6)..<(start + 8))
            else { return nil }
            return (hour, minute, second)
        }
        let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        var result: (year: Int, month: Int, day: Int, time: (Int, Int, Int))?
        if bytes.count == 29, shortDays.contains(where: { literal($0, at: 0) }), literal(", ", at: 3),
            let day = digits(5..<7), bytes[7] == 0x20, let month = month(at: 8), bytes[11] == 0x20,
            let year = digits(12..<16), bytes[16] == 0x20, let time = time(at: 17), literal(" GMT", at: 25)
        {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            result = (year, month, day, time)
        } else if bytes.count == 24, shortDays.contains(where: { literal($0, at: 0) }), bytes[3] == 0x20,
            let month = month(at: 4), bytes[7] == 0x20,
            let day = bytes[8] == 0x20 ? digits(9..<10) : digits(8..<10), bytes[10] == 0x20,
            let time = time(at: 11), bytes[19] == 0x20, let year = digits(20..<24)
        {
            // asctime: Sun Nov  6 08:49:37 1994
            result = (year, month, day, time)
        } else if let name = longDays.first(where: { literal($0 + ", ", at: 0) }) {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let start = name.utf8.count + 2
            if bytes.count == start + 22, let day = digits(start..<(start + 2)), bytes[start + 2] == UInt8(ascii: "-"),
                let month = month(at: start + 3), bytes[start + 6] == UInt8(ascii: "-"),
                let shortYear = digits((start + 7)..<(start + 9)), bytes[start + 9] == 0x20,
                let time = time(at: start + 10), literal(" GMT", at: start + 18)
            {
                let thisYear =
                    Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "GMT")!, from: now).year
                    ?? 2000
                var year = thisYear / 100 * 100 + shortYear
                if year > thisYear + 50 { year -= 100 }
                result = (year, month, day, time)
            }
        }
        guard let result, (1...31).contains(result.day), result.time.0 <= 23, result.time.1 <= 59,
            result.time.2 <= 60
        else { return nil }
        let seconds =
            daysSinceEpoch(year: result.year, month: result.month, day: result.day) * 86_400 + result.time.0 * 3600
            + result.time.1 * 60 + result.time.2
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func parse(bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var time: (hour: Int, minute: Int, second: Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        var index = 0
        while index < bytes.count {
            while index < bytes.count, isDelimiter(bytes[index]) { index += 1 }
            let start = index
            while index < bytes.count, !isDelimiter(bytes[index]) { index += 1 }
            guard start < index else { break }
            let token = UnsafeBufferPointer(rebasing: bytes[start..<index])
            if time == nil, let value = parseTime(token) {
                time = value
            } else if day == nil, let value = leadingNumber(token, digits: 1...2) {
                day = value
            } else if month == nil, let value = parseMonth(token) {
                month = value
            } else if year == nil, let value = leadingNumber(token, digits: 2...4) {
                year = value
            }
        }
        guard let time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, time.hour <= 23, time.minute <= 59, time.second <= 59 else {
            return nil
        }
        let seconds =
            daysSinceEpoch(year: year, month: month, day: day) * 86_400
            + time.hour * 3600 + time.minute * 60 + time.second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// RFC 6265's delimiters: tab, space to `/`, `;` to `@`, `[` to `` ` ``, `{` to `~`.
    private static func isDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x09, 0x20...0x2F, 0x3B...0x40, 0x5B...0x60, 0x7B...0x7E: true
        default: false
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// A number of `digits` digits at the start of `token`, not followed by another digit.
    private static func leadingNumber(_ token: UnsafeBufferPointer<UInt8>, digits: ClosedRange<Int>) -> Int? {
        var value = 0
        var count = 0
        while count < token.count, isDigit(token[count]) {
            value = value * 10 + Int(token[count] - 0x30)
            count += 1
            if count > digits.upperBound { return nil }
        }
        return digits.contains(count) ? value : nil
    }

    /// `h[h]:m[m]:s[s]`, optionally followed by non-digits.
    private static func parseTime(_ token: UnsafeBufferPointer<UInt8>) -> (hour: Int, minute: Int, second: Int)? {
        var index = 0
        /// One or two digits at `index`, after a `:` unless it is the first field.
        func field(first: Bool) -> Int? {
            if !first {
                guard index < token.count, token[index] == UInt8(ascii: ":") else { return nil }
                index += 1
            }
            var value = 0
            let start = index
            while index < token.count, index - start < 3, isDigit(token[index]) {
                value = value * 10 + Int(token[index] - 0x30)
                index += 1
            }
            return (1...2).contains(index - start) ? value : nil
        }
        guard let hour = field(first: true), let minute = field(first: false), let second = field(first: false),
            index == token.count || !isDigit(token[index])
        else { return nil }
        return (hour, minute, second)
    }

    /// The months' first three letters, lower-case, packed as in `parseMonth`.
    private static let monthKeys: [UInt32] = [
        0x6A_616E, 0x66_6562, 0x6D_6172, 0x61_7072, 0x6D_6179, 0x6A_756E,  // jan feb mar apr may jun
        0x6A_756C, 0x61_7567, 0x73_6570, 0x6F_6374, 0x6E_6F76, 0x64_6563,  // jul aug sep oct nov dec
    ]

    /// The month named by the token's first three letters (any case), 1 to 12.
    private static func parseMonth(_ token: UnsafeBufferPointer<UInt8>) -> Int? {
        guard token.count >= 3 else { return nil }
        let key = (UInt32(token[0] | 0x20) << 16) | (UInt32(token[1] | 0x20) << 8) | UInt32(token[2] | 0x20)
        return monthKeys.firstIndex(of: key).map { $0 + 1 }
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date (a day past the month's
    /// end rolls into the next month).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        // Years counted from March, so the leap day is the last day of the year.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
