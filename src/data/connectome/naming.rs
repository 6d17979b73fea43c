//! Subject and session ids from file names and paths (docs/clg-ode-model.md §1.1, §1.2), session ranking.

/// Canonical ABCD session ids, in visit order.
pub(crate) const SES_BASELINE: &str = "ses-baselineYear1Arm1";
pub(crate) const SES_2Y: &str = "ses-2YearFollowUpYArm1";
pub(crate) const SES_4Y: &str = "ses-4YearFollowUpYArm1";
pub(crate) const SES_6Y: &str = "ses-6YearFollowUpYArm1";
/// The four canonical sessions; a session's rank is its index here (999 for anything else).
pub(crate) const CANONICAL_SESSIONS: [&str; 4] = [SES_BASELINE, SES_2Y, SES_4Y, SES_6Y];

/// Rank of sessions that are none of [`CANONICAL_SESSIONS`] (empty included).
pub(crate) const UNKNOWN_SESSION_RANK: u32 = 999;

/// Ordered substring tokens → canonical session. The first token (in this order) that occurs in
/// the text wins. The SC list of the reference additionally starts each group with the `ses-`
/// spelling; that spelling contains the next token, so one list serves both uses.
const SESSION_TOKENS: [(&str, &str); 12] = [
    ("baselineYear1Arm1", SES_BASELINE),
    ("BaselineYear1Arm1", SES_BASELINE),
    ("baseline", SES_BASELINE),
    ("2YearFollowUpYArm1", SES_2Y),
    ("2_year_follow_up_y_arm_1", SES_2Y),
    ("2year", SES_2Y),
    ("4YearFollowUpYArm1", SES_4Y),
    ("4_year_follow_up_y_arm_1", SES_4Y),
    ("4year", SES_4Y),
    ("6YearFollowUpYArm1", SES_6Y),
    ("6_year_follow_up_y_arm_1", SES_6Y),
    ("6year", SES_6Y),
];

/// The canonical session named by the first known token found as a substring of `text`
/// (case-sensitive), if any. Used on SC file names (fallback rule) and on whole morphology paths.
pub(crate) fn infer_session(text: &str) -> Option<&'static str> {
    SESSION_TOKENS
        .iter()
        .find(|(token, _)| text.contains(token))
        .map(|(_, canonical)| *canonical)
}

/// Visit rank of a session: baseline 0, 2-year 1, 4-year 2, 6-year 3, anything else 999.
pub(crate) fn session_rank(session: &str) -> u32 {
    CANONICAL_SESSIONS
        .iter()
        .position(|s| *s == session)
        .map_or(UNKNOWN_SESSION_RANK, |p| p as u32)
}

/// `<subject>_<session>`, or just `<subject>` when the session is empty: the join key with the
/// morphology index and the subject table.
pub(crate) fn scan_id(subject: &str, session: &str) -> String {
    if session.is_empty() {
        subject.to_string()
    } else {
        format!("{subject}_{session}")
    }
}

/// Subject and session from an SC file's base name **without** its extension (docs/clg-ode-model.md §1.1).
///
/// 1. With `_ses-` in the name: subject = text before its first occurrence, session = `ses-` +
///    the piece up to the next `_ses-` (further pieces are discarded). The session is kept
///    verbatim, so a non-canonical one (e.g. `ses-foo`) is possible; it ranks 999.
/// 2. Otherwise subject = text before the first `_`; if that does not start with `sub-`, the
///    first `sub-[A-Za-z0-9]+` anywhere in the name, else `sub-` + the candidate if it is
///    `NDARINV[A-Za-z0-9]+`, else the candidate as is. Session = [`infer_session`] of the name,
///    or the empty string when no token matches (kept, as the reference does; the loader
///    reports such files in [`super::LoadReport::non_canonical_sessions`]).
pub(crate) fn parse_subject_session(stem: &str) -> (String, String) {
    if let Some(pos) = stem.find("_ses-") {
        let rest = &stem[pos + "_ses-".len()..];
        let piece = rest.find("_ses-").map_or(rest, |p| &rest[..p]);
        return (stem[..pos].to_string(), format!("ses-{piece}"));
    }
    let candidate = stem.split('_').next().unwrap_or(stem);
    let subject = if candidate.starts_with("sub-") {
        candidate.to_string()
    } else if let Some(found) = find_sub_token(stem) {
        found.to_string()
    } else if is_ndar_id(candidate) {
        format!("sub-{candidate}")
    } else {
        candidate.to_string()
    };
    let session = infer_session(stem).unwrap_or_default().to_string();
    (subject, session)
}

/// First match of the regex `sub-[A-Za-z0-9]+` in `text`.
fn find_sub_token(text: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(rel) = text[from..].find("sub-") {
        let start = from + rel;
        let body = &text[start + 4..];
        let len = body
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        if len > 0 {
            return Some(&text[start..start + 4 + len]);
        }
        from = start + 4;
    }
    None
}

/// Full match of `NDARINV[A-Za-z0-9]+`.
fn is_ndar_id(text: &str) -> bool {
    text.strip_prefix("NDARINV")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::test_util::golden;

    #[test]
    fn golden_parse_subject_session() {
        let cases = golden()["parse_subject_session"].as_array().unwrap();
        assert_eq!(cases.len(), 5);
        for case in cases {
            let file = case["file"].as_str().unwrap();
            let stem = file.strip_suffix(".csv").unwrap();
            let (subject, session) = parse_subject_session(stem);
            assert_eq!(subject, case["subject"].as_str().unwrap(), "{file}");
            assert_eq!(session, case["session"].as_str().unwrap(), "{file}");
            let key = case["sort_key"].as_array().unwrap();
            assert_eq!(
                u64::from(session_rank(&session)),
                key[0].as_u64().unwrap(),
                "{file}"
            );
            assert_eq!(session, key[1].as_str().unwrap());
        }
    }

    #[test]
    fn golden_infer_sesid_from_path() {
        for (path, want) in golden()["infer_sesid"].as_object().unwrap() {
            assert_eq!(infer_session(path), want.as_str(), "{path}");
        }
    }

    #[test]
    fn parsing_edge_cases() {
        // Only the first `_ses-` piece is kept.
        assert_eq!(
            parse_subject_session("sub-A_ses-x_ses-y"),
            ("sub-A".into(), "ses-x".into())
        );
        // `sub-` followed by a non-alphanumeric is not a match; the next one is.
        assert_eq!(
            parse_subject_session("x_sub-_sub-B1_baseline"),
            ("sub-B1".into(), SES_BASELINE.into())
        );
        // Not an NDAR id, no `sub-`: the candidate is kept as is, no session.
        assert_eq!(
            parse_subject_session("scan"),
            ("scan".into(), String::new())
        );
        assert_eq!(
            parse_subject_session("NDARINV_6year"),
            ("NDARINV".into(), SES_6Y.into())
        );
        // Token order: baseline wins over 4year even when it comes later in the name.
        assert_eq!(infer_session("4year_baseline"), Some(SES_BASELINE));
        assert_eq!(session_rank("ses-foo"), UNKNOWN_SESSION_RANK);
        assert_eq!(session_rank(SES_6Y), 3);
        assert_eq!(scan_id("sub-A", ""), "sub-A");
        assert_eq!(scan_id("sub-A", SES_2Y), "sub-A_ses-2YearFollowUpYArm1");
    }
}
