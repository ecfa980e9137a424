import Foundation

/// Dates as the JSON interchange writes and reads them: ISO 8601 in UTC, exact to the bit.
///
/// ```swift
/// let text = ISODate.format(Date(timeIntervalSince1970: 1_700_000_000.25)) // "2023-11-14T22:13:20.250Z"
/// let date = ISODate.parse("2026-11-22T10:30:00.250+02:00")               // 08:30:00.250 UTC
/// ISODate.parse(ISODate.format(date!)) == date                               // true, for every date
/// ```
///
/// Years 0001-9999 of the Gregorian calendar, Julian before 1582-10-15 (as Foundation's
/// Gregorian calendar counts them).
public enum ISODate {
    /// The most fraction digits ``format(_:)`` writes and ``parse(_:)`` reads.
    public static let maxFractionDigits = 40

    /// What ``parse(_:)`` accepts, in words, for error messages.
    public static let forms = "an ISO 8601 date (2026-11-22, midnight UTC) or date and time with a time zone (2026-11-22T10:30:00Z, 2026-11-22T10:30:00.250+02:00)"

    /// The calendar dates are printed and read in: Gregorian, UTC.
    package static let utcCalendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// `date` as ISO 8601 in UTC with the fewest fraction digits, 3 to ``maxFractionDigits``, that
    /// ``parse(_:)`` reads back as exactly this date (`2026-11-22T10:30:00.002Z`, `…00.000123Z`).
    /// Most dates need at most 9; a date within days of 2001-01-01, where a `Date` is finer than a
    /// nanosecond, needs more (`2000-12-23T00:03:12.1246185302734375Z`); only one within 1e-23 s of
    /// it would need more than the maximum, and is then the nearest at that many digits. Outside
    /// the years 0001-9999, Foundation's ISO 8601 form.
    ///
    /// The parser reads the text as its whole second plus the fraction's value, so each
    /// candidate is checked by that same sum.
    public static func format(_ date: Date) -> String {
        let t = date.timeIntervalSinceReferenceDate
        let whole = t.rounded(.down)
        var seconds = whole, fraction = "000"
        for digits in 3...maxFractionDigits {
            let scale = pow(10, Double(digits))
            var second = whole, scaled = ((t - whole) * scale).rounded()
            if scaled >= scale { (second, scaled) = (whole + 1, 0) }
            let text = String(Int(scaled))
            (seconds, fraction) = (second, String(repeating: "0", count: digits - text.count) + text)
            if second + Double("0." + fraction)! == t { break }
        }
        var out = [UInt8]()
        out.reserveCapacity(30)
        if seconds >= gregorianStart && seconds < yearTenThousand {
            // Proleptic Gregorian arithmetic, as the calendar counts after 1582.
            write(seconds: seconds, into: &out)
        } else {
            let c = utcCalendar.dateComponents([.year, .month, .day, .hour, .minute, .second],
                                               from: Date(timeIntervalSinceReferenceDate: seconds))
            guard let y = c.year, (1...9999).contains(y) else { return date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)) }
            write(year: y, month: c.month ?? 0, day: c.day ?? 0, hour: c.hour ?? 0, minute: c.minute ?? 0, second: c.second ?? 0, into: &out)
        }
        out.append(UInt8(ascii: "."))
        out.append(contentsOf: fraction.utf8)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `date` to the whole second below it, as ISO 8601 in UTC (`2026-11-22T10:30:00Z`): the form
    /// of a record's `created` and `modified`, as Foundation's `.iso8601` format style writes it.
    public static func formatSeconds(_ date: Date) -> String {
        let seconds = date.timeIntervalSinceReferenceDate.rounded(.down)
        guard seconds >= gregorianStart && seconds < yearTenThousand else { return date.formatted(.iso8601) }
        var out = [UInt8]()
        out.reserveCapacity(20)
        write(seconds: seconds, into: &out)
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `YYYY-MM-DDThh:mm:ss` of whole `seconds` since the reference date, in the range of the arithmetic.
    private static func write(seconds: Double, into out: inout [UInt8]) {
        let unix = Int64(seconds) + referenceToUnix
        let days = unix >= 0 ? unix / 86_400 : (unix - 86_399) / 86_400
        let rest = Int(unix - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        write(year: year, month: month, day: day, hour: rest / 3600, minute: rest / 60 % 60, second: rest % 60, into: &out)
    }

    private static func write(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, into out: inout [UInt8]) {
        func digits(_ v: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 { out.append(UInt8(0x30 + v / divisor % 10)); divisor /= 10 }
        }
        digits(year, 4); out.append(UInt8(ascii: "-")); digits(month, 2); out.append(UInt8(ascii: "-")); digits(day, 2)
        out.append(UInt8(ascii: "T")); digits(hour, 2); out.append(UInt8(ascii: ":")); digits(minute, 2)
        out.append(UInt8(ascii: ":")); digits(second, 2)
    }

    /// A whole, valid ISO 8601 date, or nil. Two forms:
    /// - `YYYY-MM-DD`: that day at midnight UTC;
    /// - `YYYY-MM-DDThh:mm:ss[.f…]` then `Z` or `±hh:mm`: a date and time with its time zone
    ///   (1 to ``maxFractionDigits`` fraction digits).
    ///
    /// Every field must be in range (a day that the month has, hour < 24, minute < 60,
    /// second < 60), and nothing may follow.
    public static func parse(_ raw: String) -> Date? {
        var raw = raw
        return raw.withUTF8 { parse(utf8: $0) }
    }

    static func parse(utf8 b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
        func number(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var v = 0
            for j in i..<(i + count) {
                guard isDigit(b[j]) else { return nil }
                v = v * 10 + Int(b[j] - 0x30)
            }
            i += count
            return v
        }
        func skip(_ c: Character) -> Bool {
            guard i < b.count, b[i] == c.asciiValue else { return false }
            i += 1
            return true
        }
        guard let year = number(4), skip("-"), let month = number(2), skip("-"), let day = number(2) else { return nil }
        var hour = 0, minute = 0, second = 0, fraction = 0.0, offset = 0
        if i < b.count {
            guard skip("T"), let h = number(2), skip(":"), let m = number(2), skip(":"), let s = number(2) else { return nil }
            (hour, minute, second) = (h, m, s)
            if skip(".") {
                let start = i
                while i < b.count, isDigit(b[i]) { i += 1 }
                guard (1...maxFractionDigits).contains(i - start),
                      let f = Double("0." + String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self)) else { return nil }
                fraction = f
            }
            if skip("Z") {
                offset = 0
            } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
                let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
                i += 1
                guard let oh = number(2), skip(":"), let om = number(2), oh < 24, om < 60 else { return nil }
                offset = sign * (oh * 3600 + om * 60)
            } else {
                return nil // a date and time needs its time zone
            }
            guard i == b.count else { return nil }
        }
        guard year >= 1, hour < 24, minute < 60, second < 60 else { return nil }
        let date: Date
        if year > 1582 {
            // Proleptic Gregorian, as the calendar counts after 1582, by arithmetic.
            guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
            let days = daysFromCivil(year: year, month: month, day: day)
            let unix = days * 86_400 + Int64(hour * 3600 + minute * 60 + second)
            date = Date(timeIntervalSinceReferenceDate: Double(unix - referenceToUnix))
        } else {
            // The calendar that dates are printed in (Julian before 1582-10-15); a field out of
            // range (1500-02-30) does not come back the same from it.
            let fields = [1, year, month, day, hour, minute, second]
            guard let d = utcCalendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute, second: second))
            else { return nil }
            let back = utcCalendar.dateComponents([.era, .year, .month, .day, .hour, .minute, .second], from: d)
            guard [back.era, back.year, back.month, back.day, back.hour, back.minute, back.second] == fields else { return nil }
            date = d
        }
        return date.addingTimeInterval(fraction - Double(offset))
    }

    /// Seconds from 1970 to 2001, the reference date.
    private static let referenceToUnix: Int64 = 978_307_200
    /// 1583-01-01 and 10000-01-01 as seconds since the reference date: the range of the arithmetic.
    private static let gregorianStart = Double(daysFromCivil(year: 1583, month: 1, day: 1) * 86_400 - referenceToUnix)
    private static let yearTenThousand = Double(daysFromCivil(year: 10_000, month: 1, day: 1) * 86_400 - referenceToUnix)

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let m = Int64(month), d = Int64(day)
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01.
    private static func civil(fromDays days: Int64) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(yoe + era * 400 + (m <= 2 ? 1 : 0)), Int(m), Int(d))
    }
}
