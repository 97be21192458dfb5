"""An OpenAI-compatible chat server for the caption tests: it answers what it was shown.

For each chat request it records (one JSON line in LOG) the frames of the request's video or
image parts (their count, the first frame's JPEG size), the text parts, and the sampling
fields; its answer names the frames ("4 frames 392x280 #1234", the last a checksum of their
bytes) or, for a text-only request,
echoes the text ("enhanced: ..."). Usage: 10 prompt tokens a frame plus 1, 3 completion
tokens. python3 vlm_recorder.py PORT LOG
"""

import base64
import json
import struct
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def jpeg_size(data):
    """(width, height) from a baseline or progressive JPEG's SOF marker."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    raise ValueError("no SOF marker")


def frames_of(part):
    kind = part.get("type")
    if kind == "video_url":
        head, _, body = part["video_url"]["url"].partition(",")
        assert head == "data:video/jpeg;base64", head
        return [base64.b64decode(f) for f in body.split(",")]
    if kind == "image_url":
        head, _, body = part["image_url"]["url"].partition(",")
        assert head == "data:image/jpeg;base64", head
        return [base64.b64decode(body)]
    return []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply({"object": "list", "data": [{"id": "recorder", "object": "model"}]})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        frames, texts, parts = [], [], []
        for m in req["messages"]:
            content = m["content"]
            if isinstance(content, str):
                texts.append(content)
                continue
            for p in content:
                parts.append(p["type"])
                frames += frames_of(p)
                if p["type"] == "text":
                    texts.append(p["text"])
        if frames:
            w, h = jpeg_size(frames[0])
            digest = zlib.crc32(b"".join(frames)) % 10000
            answer = f"{len(frames)} frames {w}x{h} #{digest}"
        else:
            answer = "enhanced: " + texts[-1]
        record = {
            "parts": parts,
            "frames": len(frames),
            "texts": texts,
            "roles": [m["role"] for m in req["messages"]],
            **{k: req.get(k) for k in ("max_tokens", "temperature", "top_p", "repetition_penalty")},
        }
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps(record) + "\n")
        usage = {"prompt_tokens": 10 * len(frames) + 1, "completion_tokens": 3, "total_tokens": 10 * len(frames) + 4}
        self.reply({"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}], "usage": usage})

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
