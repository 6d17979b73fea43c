//! `trainer data fetch` against a local HTTP server on 127.0.0.1 serving the real Fashion-MNIST
//! files of Debian's package; nothing here touches the internet.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;

use common::*;

/// Serves files of `root` over HTTP/1.0 until the test process exits.
fn serve(root: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let root = root.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                reader.read_line(&mut request).ok();
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let path = request
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .trim_start_matches('/')
                    .to_string();
                let mut s = stream;
                match std::fs::read(root.join(&path)) {
                    Ok(body) => {
                        let _ = write!(
                            s,
                            "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(&body);
                    }
                    Err(_) => {
                        let _ = write!(
                            s,
                            "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        );
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

#[test]
fn fetch_verifies_checksums() {
    let t = tempfile::tempdir().unwrap();
    let served = t.path().join("served");
    std::fs::create_dir(&served).unwrap();
    for f in std::fs::read_dir(fashion_dir()).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, served.join(f.file_name().unwrap())).unwrap();
    }
    let url = serve(served.clone());

    let out = t.path().join("good");
    let o = run_in(
        t.path(),
        &[
            "data",
            "fetch",
            "fashion-mnist",
            "--out",
            out.to_str().unwrap(),
            "--mirror",
            &url,
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["train-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(served.join(f)).unwrap()
        );
    }

    // One flipped byte inside a label file: the checksum must reject it and nothing is kept.
    let victim = served.join("t10k-labels-idx1-ubyte.gz");
    let mut raw = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&std::fs::read(&victim).unwrap()[..]),
        &mut raw,
    )
    .unwrap();
    raw[100] ^= 1;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    std::fs::write(&victim, gz.finish().unwrap()).unwrap();
    let bad = t.path().join("bad");
    let o = run_in(
        t.path(),
        &[
            "data",
            "fetch",
            "fashion-mnist",
            "--out",
            bad.to_str().unwrap(),
            "--mirror",
            &url,
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("checksum"), "{}", stderr(&o));
    assert!(!bad.join("t10k-labels-idx1-ubyte.gz").exists());
}
