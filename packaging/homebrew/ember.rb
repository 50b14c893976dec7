# Homebrew formula for Ember, built from the main branch until releases are tagged:
#   brew install --HEAD ./packaging/homebrew/ember.rb
# It builds a private virtualenv with pip: PyTorch comes from PyPI (Metal-enabled on Apple
# Silicon), llama-cpp-python is compiled with Metal on macOS.
class Ember < Formula
  include Language::Python::Virtualenv

  desc "Chat with local LLMs in the terminal, offline"
  homepage "https://github.com/ember-llm/ember"
  head "https://github.com/ember-llm/ember.git", branch: "main"
  license "Apache-2.0"

  depends_on "cmake" => :build
  depends_on "python@3.11"

  def install
    virtualenv_create(libexec, "python3.11")
    ENV["CMAKE_ARGS"] = "-DGGML_METAL=on" if OS.mac? && Hardware::CPU.arm?
    system libexec/"bin/python", "-m", "pip", "install", "--no-cache-dir", "#{buildpath}[server,starter]"
    bin.install_symlink libexec/"bin/ember"
  end

  service do
    run [opt_bin/"ember", "serve", "--host", "127.0.0.1", "--port", "8080"]
    keep_alive true
    log_path var/"log/ember.log"
    error_log_path var/"log/ember.log"
  end

  test do
    assert_match "ember #{version}", shell_output("#{bin}/ember --version")
  end
end
