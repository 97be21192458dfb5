//! datatrove's loss masks (`DocumentTokenizer(save_loss_metadata=True)`): a byte per token,
//! 1 where the loss counts, 0 in a document's `no_loss_ranges` (character ranges in its
//! metadata, mapped to tokens with `Encoding.char_to_token`), and a range that reaches the
//! end of the document drops its tokens (the ids are cut to the mask).

use arrow_array::{Array, ArrayRef, FixedSizeListArray, LargeListArray, ListArray};
use tokenizers::Encoding;

/// The metadata field holding a document's `[start, end)` character ranges.
pub const NO_LOSS_RANGES: &str = "no_loss_ranges";

/// The `no_loss_ranges` of a document's metadata (the `_meta` JSON object), if it has them:
/// `Err` names what is wrong with them.
pub fn no_loss_ranges(meta: &str) -> Result<Option<Vec<(usize, usize)>>, String> {
    // Most documents have none: no parse for them.
    if !meta.contains(NO_LOSS_RANGES) {
        return Ok(None);
    }
    let v: serde_json::Value = serde_json::from_str(meta).map_err(|e| format!("the metadata is not JSON: {e}"))?;
    let ranges = match v.get(NO_LOSS_RANGES) {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Array(a)) => a,
        Some(other) => return Err(format!("must be a list of [start, end] character positions, found {other}")),
    };
    let pair = |r: &serde_json::Value| -> Option<(usize, usize)> {
        let r = r.as_array().filter(|r| r.len() == 2)?;
        Some((r[0].as_u64()? as usize, r[1].as_u64()? as usize))
    };
    ranges
        .iter()
        .map(|r| pair(r).ok_or_else(|| format!("{r} is not a [start, end] pair of character positions")))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// The `no_loss_ranges` of row `row` of a column of their own (a Parquet source keeps a
/// document's fields as columns): a list of `[start, end]` pairs, each a list (or fixed-size
/// list) of integers; `Err` names what is wrong with them.
pub fn ranges_in_column(col: &dyn Array, row: usize) -> Result<Option<Vec<(usize, usize)>>, String> {
    if col.is_null(row) {
        return Ok(None);
    }
    let outer =
        list_value(col, row).ok_or_else(|| format!("must be a list of [start, end] pairs, found a column of {}", col.data_type()))?;
    let mut ranges = Vec::with_capacity(outer.len());
    for i in 0..outer.len() {
        let pair = list_value(outer.as_ref(), i).and_then(|p| ints(p.as_ref()));
        match pair.as_deref() {
            Some(&[start, end]) => ranges.push((start, end)),
            _ => return Err(format!("range {i} is not a [start, end] pair of character positions")),
        }
    }
    Ok(Some(ranges))
}

/// Element `i` of a list column of any list type.
fn list_value(a: &dyn Array, i: usize) -> Option<ArrayRef> {
    let any = a.as_any();
    if a.is_null(i) {
        return None;
    }
    if let Some(l) = any.downcast_ref::<ListArray>() {
        return Some(l.value(i));
    }
    if let Some(l) = any.downcast_ref::<LargeListArray>() {
        return Some(l.value(i));
    }
    any.downcast_ref::<FixedSizeListArray>().map(|l| l.value(i))
}

/// The values of an integer array, when none is null or negative.
fn ints(a: &dyn Array) -> Option<Vec<usize>> {
    macro_rules! of {
        ($($t:ty),*) => {$(
            if let Some(v) = a.as_any().downcast_ref::<arrow_array::PrimitiveArray<$t>>() {
                return (v.null_count() == 0).then(|| v.values().iter().map(|&x| usize::try_from(x).ok()).collect::<Option<Vec<_>>>()).flatten();
            }
        )*};
    }
    use arrow_array::types::*;
    of!(Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type);
    None
}

/// `DocumentTokenizer.get_loss_values` on `encoding` (made with character offsets, as the
/// Python binding makes them): ones, then for each range the tokens from the one holding
/// `start` to the one holding `end` zeroed (a position no token holds: from the first, or to
/// the last), and the mask cut before `start`'s token when `end` is past the last token.
/// Python's slicing rules throughout.
pub fn loss_mask(encoding: &Encoding, ranges: &[(usize, usize)]) -> Vec<u8> {
    let n = encoding.get_ids().len();
    let mut loss = vec![1u8; n];
    for &(start, end) in ranges {
        let (ts, te) = (encoding.char_to_token(start, 0), encoding.char_to_token(end, 0));
        let len = loss.len();
        let (a, b) = (ts.unwrap_or(0).min(len), te.unwrap_or(len).min(len));
        if a < b {
            loss[a..b].fill(0);
        }
        if te.is_none_or(|te| te >= n) {
            loss.truncate(ts.unwrap_or(len));
        }
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_from_the_metadata() {
        assert_eq!(no_loss_ranges(r#"{"url": "x"}"#), Ok(None));
        assert_eq!(no_loss_ranges(r#"{"no_loss_ranges": [[0, 5], [10, 12]]}"#), Ok(Some(vec![(0, 5), (10, 12)])));
        assert_eq!(no_loss_ranges(r#"{"no_loss_ranges": null}"#), Ok(None));
        assert!(no_loss_ranges(r#"{"no_loss_ranges": [[0]]}"#).unwrap_err().contains("[0] is not a [start, end] pair"));
        assert!(no_loss_ranges(r#"{"no_loss_ranges": "0-5"}"#).unwrap_err().contains("must be a list"));
    }

    #[test]
    fn ranges_are_read_from_a_column_of_lists() {
        use arrow_array::builder::{Int64Builder, ListBuilder};
        let mut b = ListBuilder::new(ListBuilder::new(Int64Builder::new()));
        // [[0, 5], [7, 9]], null, [[3]]
        for pair in [[0i64, 5], [7, 9]] {
            b.values().values().append_slice(&pair);
            b.values().append(true);
        }
        b.append(true);
        b.append(false);
        b.values().values().append_value(3);
        b.values().append(true);
        b.append(true);
        let col = b.finish();
        assert_eq!(ranges_in_column(&col, 0), Ok(Some(vec![(0, 5), (7, 9)])));
        assert_eq!(ranges_in_column(&col, 1), Ok(None));
        assert!(ranges_in_column(&col, 2).unwrap_err().contains("range 0 is not a [start, end] pair"));
        let text = arrow_array::StringArray::from(vec!["x"]);
        assert!(ranges_in_column(&text, 0).unwrap_err().contains("found a column of Utf8"));
    }

    fn word_level() -> tokenizers::Tokenizer {
        let vocab: serde_json::Map<String, serde_json::Value> =
            ["a", "bb", "ccc", "d"].iter().enumerate().map(|(i, w)| (w.to_string(), serde_json::json!(i))).collect();
        let json = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "a"}
        });
        json.to_string().parse().unwrap()
    }

    /// Expected masks from datatrove's `get_loss_values` run on the same tokenizer and text.
    #[test]
    fn masks_follow_datatroves_rules() {
        // "a bb ccc d": tokens at chars [0,1) [2,4) [5,8) [9,10).
        let e = word_level().encode_char_offsets("a bb ccc d", true).unwrap();
        assert_eq!(loss_mask(&e, &[]), [1, 1, 1, 1]);
        // bb..ccc: tokens 1..2 zeroed.
        assert_eq!(loss_mask(&e, &[(2, 5)]), [1, 0, 1, 1]);
        // A start no token holds (the space at 1): from the first token.
        assert_eq!(loss_mask(&e, &[(1, 5)]), [0, 0, 1, 1]);
        // An end past the text: no token holds it, so the tail from ccc is dropped.
        assert_eq!(loss_mask(&e, &[(5, 10)]), [1, 1]);
        // Both ends nowhere: everything zeroed, nothing cut ([:None]).
        assert_eq!(loss_mask(&e, &[(1, 4)]), [0, 0, 0, 0]);
        assert_eq!(loss_mask(&e, &[(4, 40)]), [0, 0, 0, 0]);
        // The last token to the end; then a range cut from the first.
        assert_eq!(loss_mask(&e, &[(9, 10)]), [1, 1, 1]);
        assert_eq!(loss_mask(&e, &[(2, 5), (0, 1)]), [0u8; 0]);
    }
}
