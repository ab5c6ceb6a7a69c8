//! One enum over the four workloads' configurations, for command lines and JSON records.

use crate::{
    Cdn, CdnConfig, Google, GoogleConfig, Twitter, TwitterConfig, Workload, WorkloadError,
};
use crate::{Ycsb, YcsbConfig};
use serde::Serialize;

/// The configuration of any of the four workloads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum WorkloadConfig {
    /// YCSB-C.
    Ycsb(YcsbConfig),
    /// Google protobuf bytes sizes.
    Google(GoogleConfig),
    /// Twitter cache (trace or synthetic).
    Twitter(TwitterConfig),
    /// CDN images.
    Cdn(CdnConfig),
}

impl WorkloadConfig {
    /// The default configuration of a workload named `ycsb`, `google`, `twitter` or `cdn`.
    pub fn default_for(name: &str) -> Result<WorkloadConfig, WorkloadError> {
        Ok(match name {
            "ycsb" => WorkloadConfig::Ycsb(YcsbConfig::default()),
            "google" => WorkloadConfig::Google(GoogleConfig::default()),
            "twitter" => WorkloadConfig::Twitter(TwitterConfig::default()),
            "cdn" => WorkloadConfig::Cdn(CdnConfig::default()),
            other => {
                return Err(WorkloadError::Config(format!(
                    "unknown workload {other:?} (expected ycsb, google, twitter or cdn)"
                )))
            }
        })
    }

    /// Builds the workload.
    pub fn build(&self) -> Result<Box<dyn Workload>, WorkloadError> {
        Ok(match self {
            WorkloadConfig::Ycsb(c) => Box::new(Ycsb::new(c.clone())?),
            WorkloadConfig::Google(c) => Box::new(Google::new(c.clone())?),
            WorkloadConfig::Twitter(c) => Box::new(Twitter::new(c.clone())?),
            WorkloadConfig::Cdn(c) => Box::new(Cdn::new(c.clone())?),
        })
    }
}

/// Parses a value shape `"NxSIZE"` (e.g. `"2x2048"`) into (values, bytes per value).
pub fn parse_shape(shape: &str) -> Result<(usize, usize), WorkloadError> {
    let bad = || {
        WorkloadError::Config(format!(
            "value shape {shape:?}: expected COUNTxSIZE with both >= 1, e.g. 2x2048"
        ))
    };
    let (n, s) = shape.split_once(['x', 'X']).ok_or_else(bad)?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    let s: usize = s.trim().parse().map_err(|_| bad())?;
    if n == 0 || s == 0 {
        return Err(bad());
    }
    Ok((n, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_bad_ones_say_why() {
        assert_eq!(parse_shape("2x2048").unwrap(), (2, 2048));
        assert_eq!(parse_shape("1X4096").unwrap(), (1, 4096));
        for bad in ["", "2", "x2", "0x10", "2x0", "ax3"] {
            let e = parse_shape(bad).unwrap_err().to_string();
            assert!(e.contains("COUNTxSIZE"), "{e}");
        }
        assert!(WorkloadConfig::default_for("nope").is_err());
    }
}
