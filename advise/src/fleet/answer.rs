//! The query API's JSON for an instant vector, read into samples: each a series'
//! labels and one count, checked to be a count.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::{cut, FleetError};

/// The largest count read as exact: past 2^53 an `f64` no longer holds every whole
/// number, and no fleet makes that many calls in a window.
const MAX_COUNT: f64 = 9_007_199_254_740_992.0;

/// One series of an instant vector: its labels and its value.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Sample {
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// Its value: a finite count, at least 0.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, `""` when the series has none.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

/// What is wrong with an answer, before the URL and query are put to it.
#[derive(Debug)]
pub(super) enum AnswerError {
    NotPrometheus(String),
    Api { error_type: String, error: String },
    BadSample { series: String, value: String },
}

impl AnswerError {
    /// The error, naming where it came from.
    pub(super) fn at(self, url: &str, query: &str) -> FleetError {
        let (url, query) = (url.to_owned(), query.to_owned());
        match self {
            AnswerError::NotPrometheus(why) => FleetError::NotPrometheus { url, query, why },
            AnswerError::Api { error_type, error } => FleetError::Api {
                url,
                query,
                error_type,
                error,
            },
            AnswerError::BadSample { series, value } => FleetError::BadSample {
                url,
                query,
                series,
                value,
            },
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: serde_json::Value,
}

#[derive(Deserialize)]
struct Series {
    metric: BTreeMap<String, String>,
    value: (f64, String),
}

/// The samples of an instant-vector answer.
pub(super) fn samples(body: &str) -> Result<Vec<Sample>, AnswerError> {
    let answer: Answer = serde_json::from_str(body)
        .map_err(|e| AnswerError::NotPrometheus(format!("not its JSON: {e}")))?;
    if answer.status != "success" {
        return Err(AnswerError::Api {
            error_type: cut(answer.error_type.as_deref().unwrap_or("unknown")),
            error: cut(answer.error.as_deref().unwrap_or("no error given")),
        });
    }
    let data = answer
        .data
        .ok_or_else(|| AnswerError::NotPrometheus("a success without data".into()))?;
    if data.result_type != "vector" {
        return Err(AnswerError::NotPrometheus(format!(
            "a {} where an instant vector was asked for",
            cut(&data.result_type)
        )));
    }
    let series: Vec<Series> = serde_json::from_value(data.result)
        .map_err(|e| AnswerError::NotPrometheus(format!("a vector that does not read: {e}")))?;
    series
        .into_iter()
        .map(|s| {
            let value = s.value.1.parse::<f64>().ok();
            match value.filter(|v| v.is_finite() && (0.0..=MAX_COUNT).contains(v)) {
                Some(value) => Ok(Sample {
                    labels: s.metric,
                    value,
                }),
                None => Err(AnswerError::BadSample {
                    series: cut(&format!("{:?}", s.metric)),
                    value: cut(&s.value.1),
                }),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(values: &[&str]) -> String {
        let result: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                format!("{{\"metric\":{{\"instance\":\"a{i}\"}},\"value\":[1700000000.5,\"{v}\"]}}")
            })
            .collect();
        format!(
            "{{\"status\":\"success\",\"data\":{{\"resultType\":\"vector\",\"result\":[{}]}}}}",
            result.join(",")
        )
    }

    #[test]
    fn counts_are_read_and_anything_else_is_named() {
        let read = samples(&vector(&["0", "12.5", "9007199254740992"])).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read[1].label("instance"), "a1");
        assert_eq!(read[1].value, 12.5);
        for bad in ["NaN", "+Inf", "-Inf", "-1", "1e300", "x"] {
            match samples(&vector(&["1", bad])) {
                Err(AnswerError::BadSample { series, value }) => {
                    assert_eq!(value, bad);
                    assert!(series.contains("a1"), "{series}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn errors_and_other_shapes_say_what_came() {
        let e = samples(
            "{\"status\":\"error\",\"errorType\":\"timeout\",\"error\":\"query timed out\"}",
        );
        assert!(
            matches!(e, Err(AnswerError::Api { ref error_type, .. }) if error_type == "timeout")
        );
        let matrix = "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[]}}";
        assert!(
            matches!(samples(matrix), Err(AnswerError::NotPrometheus(w)) if w.contains("matrix"))
        );
        assert!(matches!(
            samples("<html>"),
            Err(AnswerError::NotPrometheus(_))
        ));
        let long = format!(
            "{{\"status\":\"error\",\"errorType\":\"x\",\"error\":\"{}\"}}",
            "e".repeat(10_000)
        );
        let Err(AnswerError::Api { error, .. }) = samples(&long) else {
            panic!()
        };
        assert!(
            error.len() < 240,
            "a peer's words are cut before they are echoed: {error}"
        );
        assert!(error.ends_with("(10000 bytes in all)"), "{error}");
    }
}
